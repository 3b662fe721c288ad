"""`middle log`: every run and turn of a ticket, read back from the execution log."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from orchestrator.memory.format import DECISION_LINES
from orchestrator.names import INDEX_FAILED_NOTE, INDEXED_NOTE, RECALL_EVENT

if TYPE_CHECKING:
    from tickets.store import TicketStore


def _short(text: str | None, full: bool, limit: int = 600) -> str:
    text = (text or "").strip()
    if full or len(text) <= limit:
        return text
    return text[:limit] + f" … ({len(text) - limit} more chars; --full shows all)"


def _block(console: Console, label: str, text: str | None, full: bool) -> None:
    body = _short(text, full) or "(none)"
    console.print(f"    [bold]{label}:[/]")
    for line in body.splitlines() or [""]:
        console.print("      " + escape(line), soft_wrap=True)


def print_log(console: Console, store: TicketStore, ticket_id: str, *, full: bool = False) -> None:
    ticket = store.get_ticket(ticket_id)
    status = getattr(ticket.status, "value", ticket.status)
    runs = store.list_runs(ticket_id)
    reason = ticket.status_reason
    if status == "running":  # a run whose process died here (kill -9): as `middle tickets` shows it
        from orchestrator.lifecycle.next_steps import command
        from tickets.claims import died_note

        if died := died_note(store.get_claim(ticket.id)):
            offline = bool(runs and runs[-1].get("offline"))
            status, reason = "interrupted", f"{died}: continue it with {command('resume', ticket.id, fake=offline)}"
    console.print(f"[bold]ticket {escape(ticket.id)}[/]: {escape(ticket.title)} " + escape(f"[{status}]"))
    if ticket.source and ticket.source.startswith(("http://", "https://")):
        console.print(f"  from {escape(ticket.source)}", soft_wrap=True)
    if reason:
        console.print(f"  {escape(reason)}", soft_wrap=True)
    if not runs:
        console.print("  (never run)")
    for n, run in enumerate(runs):
        offline = bool(run.get("offline"))
        cost = "offline model, no cost" if offline else f"cost {_money(store.total_cost(run['id']))}"
        run_status = "interrupted" if status == "interrupted" and run["status"] == "running" else run["status"]
        console.print(f"\n[bold]run {run['id']}[/] {run_status} started {run.get('started_at')} "
                      f"{cost}" + (f" — {escape(run['reason'] or '')}" if run.get("reason") else ""),
                      soft_wrap=True)
        _git_lines(console, run)
        # a review round: its number and the human's words
        round_lines(console, store, run, runs[n + 1] if n + 1 < len(runs) else None)
        recalls = _recalls(store, run["id"])
        checks = _checks(store, run["id"])
        for event in checks.get(0, []):  # worktree setup, and the checks on the base commit
            _check_lines(console, event, full)
        if run.get("plan_prompt") is not None:
            console.print("  [bold]plan[/]")
            _block(console, "memories invoked", run.get("plan_memories"), full)
            _why(console, recalls.get("ticket start"))
        for turn in store.list_turns(run_id=run["id"]):
            secs = (turn.get("duration_ms") or 0) / 1000
            console.print(f"  [bold]turn {turn['turn_no']}[/] " + escape(f"[{turn['status']}]") + " "
                          f"{'' if offline else _money(turn.get('cost_usd')) + ' '}{secs:.1f}s "
                          f"session {turn.get('session_id')}")
            who = _agent_title(turn.get("coding_agent"))
            _block(console, f"prompt to {who}", turn.get("prompt"), full)
            _block(console, f"{who} response", turn.get("response"), full)
            if turn.get("error"):
                _block(console, "error", turn["error"], full)
            if turn.get("decision") is not None or turn.get("memories_invoked"):
                _block(console, "memories invoked", turn.get("memories_invoked"), full)
                _why(console, recalls.get(f"turn {turn['turn_no']}"))
                _block(console, "decision", json.dumps(turn.get("decision"), ensure_ascii=False), full)
                _decision_notes(console, turn.get("decision") or {}, full)
            for event in checks.get(turn["turn_no"], []):  # the checks its "complete" ran
                _check_lines(console, event, full)
        if run.get("check_status"):
            from orchestrator.checks.verdict import check_label

            console.print(f"  [bold]check[/] {escape(check_label(run['check_status'], run.get('check_note')))}, "
                          f"{run.get('corrections') or 0} correction(s)", soft_wrap=True)
    docs = store.memory_docs(ticket_id, include_deleted=True)
    pending = {doc for tid, _project, doc in store.pending_memory_docs() if tid == ticket_id}
    failed = _index_failure(store, ticket_id) if pending else ""
    if docs and failed:
        console.print("\n[bold]not indexed to memory[/] " + escape(f"(the last run's {failed}; "
                      "the next run indexes it, or `middle memory retry` now)"), soft_wrap=True)
    elif docs:
        console.print("\n[bold]indexed to memory[/]")
    for doc in docs:  # a multi-line doc's lines stay under it
        console.print("  " + "\n    ".join(escape(line) for line in _short(doc, full).split("\n")),
                      soft_wrap=True)


def _recalls(store: TicketStore, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """The run's `recall` events: where ("ticket start", "turn N") -> the memories shown, each
    with why (the last recall at a place wins: a resumed run recalls again)."""
    if not hasattr(store, "list_events"):
        return {}
    return {str(e["data"].get("where")): list(e["data"].get("memories") or [])
            for e in store.list_events(run_id=run_id, limit=100_000) if e["kind"] == RECALL_EVENT}


def _checks(store: TicketStore, run_id: str) -> dict[int, list[dict[str, Any]]]:
    """The run's `setup` and `check` events by the turn they followed (0: before the first turn)."""
    if not hasattr(store, "list_events"):
        return {}
    found: dict[int, list[dict[str, Any]]] = {}
    for event in store.list_events(run_id=run_id, limit=100_000):
        if event["kind"] in ("setup", "check"):
            data = {**event["data"], "kind": event["kind"]}
            found.setdefault(int(data.get("turn") or 0), []).append(data)
    return found


def _check_lines(console: Console, data: dict[str, Any], full: bool) -> None:
    """One check (or setup) run: what ran, how it ended, and the end of its output (a check's
    on failure only)."""
    label = "setup" if data["kind"] == "setup" else "base check" if data.get("phase") == "base" else "check"
    ended = "timed out" if data.get("timed_out") else f"exit {data.get('exit_code')}"
    outcome = data.get("label") or data.get("outcome") or ("passed" if data.get("exit_code") == 0 else "failed")
    ran = f", {data['tests_run']} test(s) run" if isinstance(data.get("tests_run"), int) else ""
    console.print(f"    [bold]{label}[/] " + escape(f"`{data.get('command')}`: {outcome} ({ended}{ran}, "
                                                     f"{float(data.get('duration_s') or 0):.1f}s)"), soft_wrap=True)
    for key, what in (("problem", "could not run"), ("new_failures", "new failures"),
                      ("removed_tests", "tests of the base not run"),
                      ("already_failing", "already failing on the base"), ("reason", "why")):
        value = data.get(key)
        if value and (key != "reason" or data.get("outcome") in ("failed", "undecided")):
            text = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
            console.print("      " + escape(f"{what}: {text}"), soft_wrap=True)
    if data.get("phase") == "base" and data.get("failing") and data.get("exit_code") != 0:
        failing = ", ".join(sorted(set(data["failing"])))
        console.print("      " + escape("failing on the base: " + failing), soft_wrap=True)
    # A setup's output is shown whether it passed or not (what `pip install` or `npm ci` did is
    # worth seeing); a check's only when it failed.
    if (data["kind"] == "setup" or data.get("exit_code") != 0) and data.get("tail"):
        _block(console, "its output (the end)", data["tail"], full)


def _why(console: Console, memories: list[dict[str, Any]] | None) -> None:
    """Under a memories block: per memory, the signals that put it there."""
    if not memories:
        return
    console.print("    [bold]why these memories:[/]")
    for item in memories:
        console.print("      " + escape(f"[{item.get('id')}] {item.get('why')}"), soft_wrap=True)


def round_lines(out: Console, store: TicketStore, run: Mapping[str, Any],
                following: Mapping[str, Any] | None = None) -> None:
    """Under a run in `middle log`: its review round and the human's feedback it got
    (`following`: the ticket's next run, which carries what this one did not read)."""
    if not hasattr(store, "feedback"):
        return
    events = store.feedback(run["id"])
    opening = events[0] if events and events[0].get("round") else None
    if opening is not None:
        out.print(f"  [bold]round {opening['round']}[/] — {escape(opening['label'])}: "
                  + escape(" / ".join([*opening.get("carried", []), opening["text"]])), soft_wrap=True)
    read = max([opening["id"] if opening else 0] + [int((t.get("decision") or {}).get("feedback_seen") or 0)
                                                    for t in store.list_turns(run_id=run["id"])])
    carried = store.feedback(following["id"])[:1] if following is not None else []
    carried_by = carried[0]["round"] if carried and carried[0].get("round") else None
    for event in events:
        if event is not opening:
            late = "" if event["id"] <= read else (
                " (not read yet: the run's next assessment reads it)" if run["status"] != "complete" else
                f" (came after the run's last assessment: round {carried_by} opened with it)" if carried_by else
                " (came after the run's last assessment: the ticket's next round opens with it)")
            out.print("  [bold]feedback while running[/] " + escape(f"({event['at'][:19]}): {event['text']}{late}"),
                      soft_wrap=True)


def _decision_notes(console: Console, decision: dict[str, Any], full: bool) -> None:
    """The decisions, rejected alternatives and human's instructions of a decision, one per line;
    then the memories the agent said it used, each with why."""
    for key, label in DECISION_LINES:
        items = decision.get(key)
        if isinstance(items, list) and items:
            _block(console, label.lower(), "\n".join(f"- {item}" for item in items), full)
    used = decision.get("memories_used")
    if isinstance(used, list) and used:
        _block(console, "memories used", "\n".join(
            f"- [{u.get('id')}] {u.get('why') or ''}".rstrip() for u in used if isinstance(u, dict)), full)


def _index_failure(store: TicketStore, ticket_id: str) -> str:
    """The note of the ticket's last attempt to index its completion doc, when it failed."""
    last = ""
    for event in store.list_events(ticket_id=ticket_id, limit=100_000):
        text = event["kind"] == "note" and str(event["data"].get("text", ""))
        if text and text.startswith((INDEXED_NOTE, INDEX_FAILED_NOTE)):
            last = text
    return last.split("; the ticket completes")[0] if last.startswith(INDEX_FAILED_NOTE) else ""


def _git_lines(console: Console, run: Mapping[str, Any]) -> None:
    """The run's code change: branch and base, the commit made, the changed paths, merge/revert."""
    if run.get("isolation") == "none":
        console.print("  [dim]ran in the project directory (isolation = none)[/]")
        return
    if not run.get("branch"):
        return
    console.print(f"  branch {escape(run['branch'])} from {escape(run.get('base_branch') or '?')} "
                  f"at {(run.get('base_commit') or '?')[:10]}")
    if run.get("head_commit"):
        console.print(f"  commit {run['head_commit'][:10]}: {len(run.get('changes') or [])} file(s) changed")
        for change in run.get("changes") or []:
            counts = "binary" if change.get("added") is None else f"+{change['added']} -{change['deleted']}"
            console.print(f"    {escape(change['path'])} ({counts})", soft_wrap=True)
    elif run.get("status") == "complete":
        console.print("  no files changed")
    if run.get("merge_commit"):
        console.print(f"  merged into {escape(run.get('base_branch') or '?')} at {run['merge_commit'][:10]}")
    if run.get("revert_commit"):
        console.print(f"  reverted by {run['revert_commit'][:10]}")
    if run.get("pr_url"):
        console.print(f"  pull request {escape(run['pr_url'])} ({escape(run.get('pr_state') or '?')})", soft_wrap=True)
    elif run.get("pr_state") == "opening":
        console.print("  pull request being opened (not recorded yet): run `middle pr` again to finish")
    elif run.get("pr_state") == "gone":
        console.print("  pull request gone from GitHub (forgotten): `middle pr` opens a new one")


# -- `middle log --follow`: the run's stored events, printed as they arrive ------------------------

FOLLOW_POLL_S = 0.5  # the store is polled: the run may be in another process


def _agent_title(kind: str | None) -> str:
    """A turn's agent by name, from the kind it recorded (none before per-ticket agents: Claude Code)."""
    if not kind or kind == "claude-code":
        return "Claude Code"
    from orchestrator.plugins import manager

    try:
        cls = manager.registry().coding_agent_class(kind)
    except Exception:  # a plugin no longer installed: its kind still names it
        return kind
    return str(getattr(cls, "title", None) or kind)


def _money(value: Any) -> str:
    return f"${float(value or 0):.4f}"


def describe_event(event: dict[str, Any], offline: bool = False) -> str:
    """One line of plain text for a stored run event (the dashboard's live log says the same);
    `offline`: the run is on the fake model, so its made-up costs are left out."""
    d, kind = event.get("data") or {}, event.get("kind")
    if offline:
        d = {k: v for k, v in d.items() if k != "cost_usd"}
    if kind == "run_start":
        said = "run resumed" if d.get("resume") else "run started"
        return f"{said} by {d['by']}" if isinstance(d.get("by"), str) and d["by"] else said
    if kind == "node":
        if d.get("phase") == "start":
            return f"▶ {d.get('node')}"
        extra = "".join([f" (turn {d['turn']})" if d.get("turn") else "",
                         f" {_money(d['cost_usd'])}" if d.get("cost_usd") else "",
                         f" — error: {d['error']}" if d.get("error") else "",
                         f" — {d['reason']}" if d.get("reason") else ""])
        return f"✓ {d.get('node')}{extra}"
    if kind == "note":
        return str(d.get("text", ""))
    if kind == "decision":
        dec = d.get("decision") or {}
        text = f"decision: {'complete' if dec.get('complete') else 'continue'}"
        if dec.get("summary"):
            text += f" — {dec['summary']}"
        if dec.get("next_prompt"):
            text += f" — next: {dec['next_prompt']}"
        return text
    if kind in ("check", "setup"):
        label = "setup" if kind == "setup" else "base check" if d.get("phase") == "base" else "check"
        ended = "timed out" if d.get("timed_out") else f"exit {d.get('exit_code')}"
        outcome = d.get("outcome") or ("passed" if d.get("exit_code") == 0 else "failed")
        last = [line.strip() for line in str(d.get("tail") or "").splitlines() if line.strip()]
        said = f" — {last[-1][:200]}" if kind == "setup" and last else ""  # what setup did, passed or not
        return f"{label} `{d.get('command')}`: {outcome} ({ended}){said}"
    if kind == "feedback":
        from tickets.rounds import feedback_label

        head = f"round {d['round']}: " if d.get("round") else ""
        return f"{head}{feedback_label(d)}: {d.get('text', '')}"
    if kind == RECALL_EVENT:
        ids = ", ".join(str(m.get("id")) for m in d.get("memories") or [])
        return f"recalled at {d.get('where')}: {ids}"
    if kind == "run_end":
        text = f"run ended: {d.get('status')}"
        if "turns" in d:
            text += f", {d['turns']} turn(s)"
        if "cost_usd" in d:
            text += f", {_money(d['cost_usd'])}"
        return text + (f" — {d['reason']}" if d.get("reason") else "")
    if kind in ("coding_agent", "worker"):  # ("worker": what runs before 0.2 recorded)
        kind_of = d.get("type")
        who = str(d.get("agent") or "Claude Code")  # (events before other agents name none)
        if kind_of == "tool_use":
            inp = d.get("input") or {}
            target = inp.get("file_path") or inp.get("command") or inp.get("pattern") or ""
            return f"{who} ▸ {d.get('name')} {target}".rstrip()
        if kind_of == "text":
            return f"{who}: {d.get('text', '')}"
        if kind_of == "start":
            return f"{who} started (pid {d.get('pid')})"
        if kind_of == "timeout":
            return f"{who} timed out after {d.get('after_s')}s"
        if kind_of == "log":
            return f"{who} log: {d.get('line', '')}"
        if kind_of == "result":
            return (f"{who} finished: {'error' if d.get('is_error') else 'ok'}"
                    + (f", {_money(d['cost_usd'])}" if d.get("cost_usd") else ""))
        return f"{who} {kind_of or 'event'}"
    return json.dumps(d, ensure_ascii=False)


def follow_log(console: Console, store: TicketStore, ticket_id: str, *, poll_s: float = FOLLOW_POLL_S,
               sleep: Any = None) -> str | None:
    """Print the ticket's latest run event by event from its start, following it live until it ends.

    With no run yet, wait for the first one (start it from another terminal). Returns the run's
    final status, or None when stopped with Ctrl-C.
    """
    import time

    from orchestrator.cli.output import safe

    # Wait for the next event: pushed at once by a PostgreSQL store (LISTEN/NOTIFY), a short
    # poll on SQLite (the run may be in another process, which cannot signal this one).
    if sleep is None:
        sleep = store.wait_for_events if hasattr(store, "wait_for_events") else time.sleep
    store.get_ticket(ticket_id)  # an unknown id is an error before any waiting
    try:
        run = store.latest_run(ticket_id)
        if run is None:
            console.print(f"waiting for ticket {safe(ticket_id)} to start (Ctrl-C to stop)…")
            while run is None:
                sleep(poll_s)
                run = store.latest_run(ticket_id)
        console.print(f"[bold]run {run['id']}[/] of ticket {safe(ticket_id)}")
        last, last_kind = 0, None
        while True:
            events = store.list_events(run_id=run["id"], after=last)
            for event in events:
                last, last_kind = event["id"], event["kind"]
                if event["kind"] == "run_start":  # (it marks an offline run first)
                    run = store.get_run(run["id"])
                line = safe(describe_event(event, offline=bool(run.get("offline"))))
                style = "red" if event["kind"] == "run_end" and event["data"].get("status") == "failed" else "dim"
                console.print(f"[{style}]{event['at'][11:19]}[/] {event['kind']:<9} {line}", soft_wrap=True)
            if not events and last_kind == "run_end":
                status = store.get_run(run["id"])["status"]
                if status != "running":
                    return status
            if not events:
                sleep(poll_s)
    except KeyboardInterrupt:
        return None
