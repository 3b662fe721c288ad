// middle dashboard: plain JS, no build step. Server-rendered fragments are swapped in on live events,
// so every piece of stored text is escaped by the server's templates; text built here uses textContent.
"use strict";

const CSRF = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
// ("worker": the coding agent's events as runs before 0.2 recorded them)
const EVENT_KINDS = ["run_start", "node", "note", "coding_agent", "worker", "decision", "run_end", "feedback", "recall",
                     "check", "setup", "end"];

async function api(method, url, body) {
  const response = await fetch(url, {
    method, credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": CSRF, "Accept": "application/json",
              "X-Middle-Board": "1"},
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await response.json(); } catch (e) { /* an empty or non-JSON body */ }
  if (!response.ok) {
    const err = new Error((data && data.error) || `HTTP ${response.status}`);
    err.status = response.status;
    err.data = data || {};  // e.g. the files a discard would delete (`untracked`)
    throw err;
  }
  return data;
}

function toast(message, bad) {
  const box = document.getElementById("toast");
  const item = document.createElement("div");
  item.textContent = message;
  if (bad) { item.className = "bad"; item.setAttribute("role", "alert"); }
  box.appendChild(item);
  setTimeout(() => item.remove(), bad ? 12000 : 5000);
}

function debounce(fn, ms) {
  let timer = null;
  return () => { clearTimeout(timer); timer = setTimeout(fn, ms); };
}

// Fetch a server-rendered fragment and put each of its top-level elements in place of the
// page's element with the same id (the server escaped every stored text in it).
async function swap(url) {
  const response = await fetch(url, {credentials: "same-origin", headers: {"Accept": "text/html"}});
  if (!response.ok) return;
  const focused = document.activeElement;
  const focusedAction = focused && focused.dataset.action;
  const focusedId = focused && focused.id;
  const doc = new DOMParser().parseFromString(await response.text(), "text/html");
  for (const fresh of Array.from(doc.body.children)) {
    const old = fresh.id && document.getElementById(fresh.id);
    if (!old) continue;
    const open = Array.from(old.querySelectorAll("details[data-run]"), (d) => [d.dataset.run, d.open]);
    // Keep where the reader had scrolled the board's columns to (an update must not jump back).
    const scrolled = Array.from(old.querySelectorAll("[data-keep-scroll][id]"),
                                (el) => [el.id, el.scrollLeft, el.scrollTop]);
    old.replaceWith(fresh);
    open.forEach(([run, isOpen]) => {  // keep the runs the reader opened or closed
      const again = fresh.querySelector(`details[data-run="${run}"]`);
      if (again) again.open = isOpen;
    });
    scrolled.forEach(([id, left, top]) => {
      const again = document.getElementById(id);
      if (again) { again.scrollLeft = left; again.scrollTop = top; }
    });
  }
  if (focusedAction) {  // keep keyboard users where they were
    const again = document.querySelector(`[data-action="${focusedAction}"]`);
    if (again) again.focus();
  } else if (focusedId && focusedId !== "main") {
    const again = document.getElementById(focusedId);
    if (again && again !== document.activeElement) again.focus({preventScroll: true});
  }
}

// Append text to an element, turning http(s) URLs into links (never markup from the text itself).
function linkified(parent, text) {
  const url = /https?:\/\/[^\s<>"'`]+/g;
  let pos = 0, match;
  while ((match = url.exec(text)) !== null) {
    const href = match[0].replace(/[.,;:!?)\]}'"]+$/, "");
    parent.appendChild(document.createTextNode(text.slice(pos, match.index)));
    const a = document.createElement("a");
    a.href = href; a.textContent = href; a.rel = "noopener noreferrer nofollow"; a.target = "_blank";
    parent.appendChild(a);
    pos = match.index + href.length;
    url.lastIndex = pos;
  }
  parent.appendChild(document.createTextNode(text.slice(pos)));
}

function money(v) { return "$" + Number(v || 0).toFixed(4); }

// `offline`: the run is on the built-in fake model, whose costs are made up: they are not shown.
function describe(ev, offline) {
  const d = {...(ev.data || {})};
  if (offline) delete d.cost_usd;
  switch (ev.kind) {
    case "run_start": return (d.resume ? "run resumed" : "run started") + (d.by ? " by " + d.by : "");
    case "recall": return `recalled at ${d.where}: ` + (d.memories || []).map((m) => `[${m.id}] ${m.why}`).join(" · ");
    case "node":
      if (d.phase === "start") return `▶ ${d.node}`;
      return `✓ ${d.node}` + (d.turn ? ` (turn ${d.turn})` : "") + (d.cost_usd ? ` ${money(d.cost_usd)}` : "")
        + (d.memories ? ` — memories: ${d.memories.split("\n").length - 1} line(s)` : "")
        + (d.error ? ` — error: ${d.error}` : "") + (d.reason ? ` — ${d.reason}` : "");
    case "note": return d.text || "";
    case "decision": {
      const dec = d.decision || {};
      return `decision: ${dec.complete ? "complete" : "continue"}` + (dec.summary ? ` — ${dec.summary}` : "")
        + (dec.next_prompt ? ` — next: ${dec.next_prompt}` : "");
    }
    case "feedback": return (d.round ? `round ${d.round}: ` : "") +
      `${typeof d.by === "string" && d.by ? `feedback from ${d.by}` : "the human's feedback"}: ${d.text || ""}`;
    case "check":
    case "setup": {
      const label = ev.kind === "setup" ? "setup" : d.phase === "base" ? "base check" : "check";
      const outcome = d.outcome || (d.exit_code === 0 ? "passed" : "failed");
      return `${label} \`${d.command}\`: ${outcome} (${d.timed_out ? "timed out" : `exit ${d.exit_code}`})`;
    }
    case "run_end":
      return `run ended: ${d.status}` + (d.turns !== undefined ? `, ${d.turns} turn(s)` : "")
        + (d.cost_usd !== undefined ? `, ${money(d.cost_usd)}` : "") + (d.reason ? ` — ${d.reason}` : "");
    case "coding_agent":
    case "worker": {
      const input = d.input || {};
      const who = d.agent || "Claude Code";  // events recorded before other agents name none
      if (d.type === "tool_use") return `${who} ▸ ${d.name} ${input.file_path || input.command || input.pattern || ""}`;
      if (d.type === "text") return `${who}: ${d.text || ""}`;
      if (d.type === "start") return `${who} started (pid ${d.pid})`;
      if (d.type === "timeout") return `${who} timed out after ${d.after_s}s`;
      if (d.type === "log") return `${who} log: ${d.line || ""}`;
      if (d.type === "result") return `${who} finished: ${d.is_error ? "error" : "ok"}` + (d.cost_usd ? `, ${money(d.cost_usd)}` : "");
      return `${who} ${d.type || "event"}`;
    }
    default: return JSON.stringify(d);
  }
}

function follow(url, onEvent, stateEl) {
  const source = new EventSource(url);
  const handle = (msg) => {
    let ev = {};
    try { ev = JSON.parse(msg.data); } catch (e) { return; }
    onEvent(msg.type, ev, source);
  };
  EVENT_KINDS.forEach((kind) => source.addEventListener(kind, handle));
  source.onopen = () => { if (stateEl) stateEl.textContent = "· live"; };
  source.onerror = () => { if (stateEl) stateEl.textContent = "· reconnecting…"; };
  window.addEventListener("pagehide", () => source.close());
  return source;
}

// The board's row of columns: shade the side that has more columns, and let the column links
// above it scroll that column into view (the row scrolls sideways on its own, not the page).
function initColumns() {
  const wrap = document.getElementById("board-scroll");
  const row = document.getElementById("columns");
  if (!wrap || !row) return;
  const edges = () => {
    wrap.classList.toggle("more-left", row.scrollLeft > 1);
    wrap.classList.toggle("more-right", row.scrollLeft + row.clientWidth < row.scrollWidth - 1);
  };
  row.addEventListener("scroll", edges, {passive: true});
  edges();
  document.querySelectorAll(".jump a[data-column]").forEach((link) => link.addEventListener("click", (e) => {
    const column = row.querySelector(`[data-status="${link.dataset.column}"]`);
    if (!column || getComputedStyle(row).display !== "flex") return;  // a phone: the link scrolls the page
    e.preventDefault();
    column.scrollIntoView({inline: "start", block: "nearest", behavior: "smooth"});
    column.querySelector("h2").setAttribute("tabindex", "-1");
    column.querySelector("h2").focus({preventScroll: true});
  }));
  return edges;
}

function initBoard() {
  const board = document.getElementById("board");
  const project = board.dataset.project;
  let edges = initColumns();
  window.addEventListener("resize", () => edges && edges());
  const refresh = debounce(async () => {
    await swap("/board/fragment" + (project ? `?project=${encodeURIComponent(project)}` : ""));
    edges = initColumns();
  }, 300);
  follow(`/api/events/stream?after=${board.dataset.after}`, refresh);
  const dialog = document.getElementById("new-ticket");
  const opener = document.getElementById("new-ticket-open");
  const form = document.getElementById("new-ticket-form");
  opener.addEventListener("click", () => { dialog.showModal(); form.elements.title.focus(); });
  dialog.addEventListener("close", () => opener.focus());
  dialog.querySelector('[data-action="close-dialog"]').addEventListener("click", () => dialog.close());
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = Object.fromEntries(new FormData(form).entries());
    try {
      const ticket = await api("POST", "/api/tickets", body);
      window.location.href = `/tickets/${encodeURIComponent(ticket.id)}`;
    } catch (err) { toast(err.message, true); }
  });
}

// What the events panel says about the run: live while it runs, and how it ended once it has.
function runState(stateEl, status) {
  stateEl.textContent = status === "running" ? "· live" : status ? `· run ended: ${status}` : "· no run yet";
}

function initTicket() {
  const article = document.querySelector("article.ticket");
  const id = article.dataset.ticket;
  const live = document.getElementById("live");
  const list = document.getElementById("events");
  const stateEl = document.getElementById("live-state");
  let status = live.dataset.runStatus;
  const offlineRuns = new Set((live.dataset.offlineRuns || "").split(" ").filter(Boolean));
  const knownRuns = new Set((live.dataset.runs || "").split(" ").filter(Boolean));
  // The feedback box sits outside the swapped area (what is typed survives a refresh): after each
  // refresh it shows exactly when the ticket takes feedback (not once merged or discarded).
  const feedbackBox = () => {
    const form = document.getElementById("feedback-form");
    const line = document.querySelector("#ticket-status-area .status-line");
    if (form && line) form.hidden = line.dataset.acceptsFeedback !== "yes";
  };
  const refresh = debounce(async () => {
    await swap(`/tickets/${encodeURIComponent(id)}/fragment`);
    feedbackBox();
  }, 250);
  const source = follow(`/api/tickets/${encodeURIComponent(id)}/stream?after=${live.dataset.after}`, (kind, ev) => {
    if (ev.kind === "run_start") status = "running";
    if (ev.kind === "run_end") status = (ev.data || {}).status || "ended";
    runState(stateEl, status);
    const li = document.createElement("li");
    li.dataset.kind = ev.kind;
    const when = document.createElement("span");
    when.className = "k";
    when.textContent = `${(ev.at || "").slice(11, 19)} ${ev.kind}`;
    li.appendChild(when);
    li.appendChild(document.createTextNode(" "));
    linkified(li, describe(ev, offlineRuns.has(ev.run_id) || (live.dataset.newRunsOffline === "yes" && !knownRuns.has(ev.run_id))));
    if ((ev.data || {}).error || (ev.kind === "run_end" && ev.data.status === "failed")) li.classList.add("ev-error");
    list.appendChild(li);
    list.scrollTop = list.scrollHeight;
    if (ev.kind === "run_start" && ev.id > Number(live.dataset.after)) live.open = true;
    if (!["coding_agent", "worker"].includes(kind) || ["start", "result", "timeout"].includes((ev.data || {}).type)) refresh();
  });
  source.onopen = () => runState(stateEl, status);
  source.onerror = () => { stateEl.textContent = "· reconnecting…"; };
  const paths = {run: "run", rerun: "run", resume: "resume", revert: "revert", merge: "merge", discard: "discard", pr: "pr"};
  article.addEventListener("click", async (e) => {
    const button = e.target.closest("button[data-action]");
    if (!button || !paths[button.dataset.action]) return;
    const warn = {discard: "Discard this ticket's worktree, branch and memory doc?",
                  revert: "Add a revert commit on the base branch and delete this ticket's memory doc?"};
    if (warn[button.dataset.action] && !window.confirm(warn[button.dataset.action])) return;
    button.disabled = true;
    const action = button.dataset.action;
    const url = `/api/tickets/${encodeURIComponent(id)}/${paths[action]}`;
    try {
      let result;
      try {
        result = await api("POST", url, action === "rerun" ? {rerun: true} : undefined);
      } catch (err) {
        // Files git does not track in the ticket's worktree are the user's: delete them only when asked.
        const untracked = (err.data && err.data.untracked) || [];
        if (!untracked.length || !window.confirm(`${err.message}\n\nDelete them too?`)) throw err;
        result = await api("POST", url, {force: true});
      }
      if (["revert", "merge", "discard", "pr"].includes(action)) {
        toast(result.message);
        (result.warnings || []).forEach((w) => toast(`Warning: ${w}`, true));
      }
      else toast(result.run_id ? `Run ${result.run_id.slice(0, 8)} started` : "Queued: it starts when a running ticket ends");
    } catch (err) { toast(err.message, true); }
    refresh();
  });
  const form = document.getElementById("feedback-form");
  if (form) form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const box = form.querySelector("textarea");
    const button = form.querySelector("button");
    button.disabled = true;
    try {
      const result = await api("POST", `/api/tickets/${encodeURIComponent(id)}/feedback`, {text: box.value});
      toast(result.status === "stored" ? result.message
        : result.run_id ? `Round started (run ${result.run_id.slice(0, 8)})` : "Queued: it starts when a running ticket ends");
      box.value = "";
    } catch (err) { toast(err.message, true); }
    button.disabled = false;
    refresh();
  });
}

function initMemory() {
  const root = document.getElementById("memory");
  if (!root) return;
  const base = `/api/projects/${encodeURIComponent(root.dataset.project)}/memory`;
  // The page reloads after a change to show it: the success message is kept for the reloaded
  // page (sessionStorage), which shows it, so it is not lost 300 ms after it appeared.
  const KEPT = "middle-memory-toast";
  const kept = sessionStorage.getItem(KEPT);
  if (kept) { sessionStorage.removeItem(KEPT); toast(kept); }
  const reload = () => window.location.reload();
  const call = async (method, url, body, done) => {
    try {
      const result = await api(method, url, body);
      if (done) { const message = done(result); toast(message); sessionStorage.setItem(KEPT, message); }
      setTimeout(reload, 300);
    } catch (err) { toast(err.message, true); }
  };
  const add = document.getElementById("add-doc");
  add.addEventListener("submit", (e) => {
    e.preventDefault();
    const body = {text: add.elements.text.value};
    if (add.elements.valid_until.value) body.valid_until = add.elements.valid_until.value;
    call("POST", `${base}/docs`, body, (r) => r.change ? `Added ${r.id} (change ${r.change})` : r.message);
  });
  // The listed docs and the search hits carry the same actions.
  const lists = ["docs", "results"].map((id) => document.getElementById(id)).filter(Boolean);
  const hideAll = (item) => item.querySelectorAll(".edit-form, .supersede-form, .confirm").forEach((el) => { el.hidden = true; });
  const onClick = async (e) => {
    const button = e.target.closest("button[data-action]");
    if (!button) return;
    const item = button.closest(".doc-item");
    // the URL names the whole id (data-key): two docs' 8-character ids can meet in a big store
    const id = item.dataset.id, doc = `${base}/docs/${encodeURIComponent(item.dataset.key || id)}`;
    const confirmBox = item.querySelector(".confirm");
    const action = button.dataset.action;
    if (action === "edit" || action === "supersede") {
      hideAll(item);
      const form = item.querySelector(`.${action}-form`);
      form.hidden = false; form.elements.text.focus();
    } else if (action === "delete") {  // destructive: asked first
      hideAll(item);
      confirmBox.querySelector(".confirm-text").textContent = `Forget doc ${id}? (Undo in Changes puts it back.)`;
      confirmBox.hidden = false; confirmBox.querySelector('[data-action="cancel"]').focus();
    } else if (action === "cancel") {
      hideAll(item); item.querySelector('[data-action="edit"]').focus();
    } else if (action === "confirm") {
      call("POST", `${doc}/forget`, undefined, (r) => `Forgot ${r.id} (change ${r.change})`);
    } else if (action === "pin" || action === "unpin") {
      call("POST", `${doc}/${action}`, undefined, (r) => `${r.id}: ${r.message}`);
    } else if (action === "show") {
      const box = item.querySelector(".show-box");
      if (!box.hidden) { box.hidden = true; button.setAttribute("aria-expanded", "false"); return; }
      try {
        const shown = await api("GET", doc);
        box.textContent = "";
        const lines = [`id ${shown.id}`, `from: ${shown.from}`];
        if (shown.pinned) lines.push("pinned: always in the agent's memories");
        if (shown.superseded_by) lines.push(`superseded by ${shown.superseded_by.short_id}: ${shown.superseded_by.doc}`);
        shown.supersedes.forEach((s) => lines.push(`supersedes ${s.short_id}: ${s.doc}`));
        shown.changes.forEach((c) => lines.push(`change ${c.id} ${c.at.slice(0, 19)} ${c.who}: ${c.text}`));
        const pre = document.createElement("pre");
        pre.className = "text"; pre.textContent = lines.join("\n");
        box.appendChild(pre); box.hidden = false; button.setAttribute("aria-expanded", "true");
      } catch (err) { toast(err.message, true); }
    }
  };
  const onSubmit = (e) => {
    e.preventDefault();
    const item = e.target.closest(".doc-item");
    const doc = `${base}/docs/${encodeURIComponent(item.dataset.key || item.dataset.id)}`;
    const text = e.target.elements.text.value;
    if (e.target.classList.contains("supersede-form")) {
      call("POST", `${doc}/supersede`, {text}, (r) => `${r.old_id} superseded by ${r.id} (change ${r.change})`);
    } else {
      // the validity only when changed: a day, or "never" when the day was cleared
      const until = e.target.elements.valid_until, was = until.dataset.was;
      const body = {text};
      if (until.value !== was) body.valid_until = until.value || "never";
      call("POST", `${doc}/edit`, body, (r) => r.old_id ? `Edited ${r.old_id}: now ${r.id} (change ${r.change})`
        : `${r.id}: ${r.message}${r.change ? ` (change ${r.change})` : ""}`);
    }
  };
  lists.forEach((list) => { list.addEventListener("click", onClick); list.addEventListener("submit", onSubmit); });
  initBulk(base, call);
  document.getElementById("changes").addEventListener("click", (e) => {
    const button = e.target.closest("button[data-action]");
    if (!button) return;
    const item = button.closest(".change-item");
    const confirmBox = item.querySelector(".confirm");
    if (button.dataset.action === "undo") { confirmBox.hidden = false; confirmBox.querySelector('[data-action="cancel"]').focus(); }
    else if (button.dataset.action === "cancel") { confirmBox.hidden = true; }
    else if (button.dataset.action === "confirm-undo") {
      call("POST", `${base}/changes/${item.dataset.change}/undo`, undefined, (r) => `${r.message} (change ${r.change})`);
    }
  });
}

// Forget many: the docs a filter picks, looked at a page at a time, then forgotten as one
// change with the token of exactly that selection (one Undo in Changes puts them all back).
function initBulk(base, call) {
  const form = document.getElementById("bulk-filter");
  if (!form) return;
  const picked = document.getElementById("bulk-picked"), list = document.getElementById("bulk-list");
  const more = document.getElementById("bulk-more"), confirmBox = document.getElementById("bulk-confirm");
  let query = "", selection = null;
  const load = async (cursor) => {
    const url = `${base}/bulk?${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    try {
      const page = await api("GET", url);
      if (!cursor) { list.textContent = ""; selection = page; }
      page.docs.forEach((d) => {
        const li = document.createElement("li");
        li.className = "bulk-doc"; li.dataset.id = d.id;
        const code = document.createElement("code"); code.textContent = d.id;
        li.append(code, ` ${d.text.length > 160 ? d.text.slice(0, 160) + "…" : d.text}`);
        list.appendChild(li);
      });
      document.getElementById("bulk-count").textContent = String(page.count);
      document.getElementById("bulk-words").textContent = page.filter;
      more.hidden = !page.next_cursor; more.dataset.cursor = page.next_cursor || "";
      confirmBox.hidden = true; picked.hidden = false;
    } catch (err) { toast(err.message, true); }
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const params = new URLSearchParams();
    for (const el of form.elements) if (el.name && el.value) params.set(el.name, el.value);
    query = params.toString();
    load(null);
  });
  more.addEventListener("click", () => load(more.dataset.cursor));
  document.getElementById("bulk-forget").addEventListener("click", () => {
    document.getElementById("bulk-confirm-text").textContent =
      `Forget all ${selection.count} docs picked? (One Undo in Changes puts them all back.)`;
    confirmBox.hidden = false; document.getElementById("bulk-cancel").focus();
  });
  document.getElementById("bulk-cancel").addEventListener("click", () => { confirmBox.hidden = true; });
  document.getElementById("bulk-yes").addEventListener("click", () => {
    const body = Object.fromEntries(new URLSearchParams(query));
    body.confirm = selection.confirm;
    call("POST", `${base}/bulk/forget`, body, (r) => `Forgot ${r.count} docs (change ${r.change}: Undo in Changes puts them back)`);
  });
}

function initCommon() {
  const logout = document.querySelector('[data-action="logout"]');
  if (logout) logout.addEventListener("click", async () => {
    await fetch("/logout", {method: "POST", credentials: "same-origin", headers: {"X-CSRF-Token": CSRF}});
    window.location.href = "/login";
  });
}

document.addEventListener("DOMContentLoaded", () => {
  initCommon();
  const page = document.body.dataset.page;
  if (page === "board") initBoard();
  if (page === "ticket") initTicket();
  if (page === "memory") initMemory();
});
