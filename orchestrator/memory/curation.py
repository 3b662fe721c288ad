"""Curation: a person finds a wrong memory, sees where it came from, and fixes it.

`Curator` is the one owner of the verbs `middle memory show|edit|supersede|pin|unpin|delete|undo`,
the HTTP API's and the board's: each runs under the project's memory lock (the backends' stores)
and records itself in the ticket store (tickets/curation.py: the doc's state and the change, who,
when, before and after), so every change can be taken back with `undo`. What the states do to
recall is `curate` (a superseded doc ranks right below its replacement, marked) and
`pinned_docs` (always in the agent's block); the memory facade applies both on every recall,
reading the states afresh each time, so a change made by another process counts at once.

A doc is named by its id (SHA-256 of its text; 4+ hex characters of it are enough when they
name one doc) or by its exact text.
"""

from __future__ import annotations

import getpass
import socket
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol

from orchestrator.errors import MemoryStoreError
from orchestrator.killpoints import point
from orchestrator.memory.format import DOC_ID_CHARS, doc_id, shortest_unique
from orchestrator.memory.timeline import expired_ids, expiry_note, parse_when

if TYPE_CHECKING:
    from orchestrator.plugins.memory_backend import MemoryBackend, RetrieveResult
    from tickets.curation import MemoryChange, MemoryState
    from tickets.store import TicketStore


class CuratedMemory(Protocol):
    """What the curation verbs need of a project memory: the memory facade has it. Named here,
    not imported from memory.facade, because the facade imports this module (what the states
    do to recall) and a type-only import back would tie the two into a circle."""

    def prepare_doc(self, doc: str, *, refuse_long: bool = False) -> str: ...
    def project_lock(self, project_id: str, op: str) -> AbstractContextManager[Any]: ...
    def has_doc(self, project_id: str, doc: str) -> bool: ...
    def index(self, project_id: str, docs: list[str], *, refuse_long: bool = False) -> None: ...
    def index_records(self, project_id: str, records: list[tuple[str, float | None]]) -> None: ...
    def delete(self, project_id: str, docs: list[str]) -> int: ...
    def list_docs(self, project_id: str) -> list[str]: ...
    def find_docs(self, project_id: str, id_or_text: str) -> list[str]: ...
    def docs_present(self, project_id: str, docs: list[str]) -> set[str]: ...
    def doc_time(self, project_id: str, doc: str) -> float | None: ...
    def doc_times(self, project_id: str, docs: list[str]) -> dict[str, float]: ...
    # bulk changes, `--as-of` and the texts recall shows that are no docs (a summary)
    backend_cls: type[MemoryBackend]
    def has_store(self, project_id: str) -> bool: ...
    def using(self, project_id: str, op: str) -> AbstractContextManager[Any]: ...
    def check_queries(self, queries: Any) -> list[str]: ...
    def derived_texts(self, project_id: str) -> list[tuple[str, str]]: ...
    def pins_shown(self, project_id: str) -> tuple[int, int]: ...
    def short_ids(self, project_id: str, idents: list[str]) -> dict[str, str]: ...


class CurationError(MemoryStoreError, ValueError):
    """A curation request that cannot be done as asked (400): nothing was changed."""


class MemoryDocNotFound(CurationError, LookupError):
    """No doc (or change) has that id (404)."""


def short(ident: str) -> str:
    return ident[:DOC_ID_CHARS]


SHOWN_CANDIDATES = 5  # an ambiguous id's error line names this many of its docs


def candidates(docs: list[str]) -> str:
    """The docs an ambiguous id names, for its one error line: each one's shortest id that
    tells it from the others and the start of its text."""
    ids = [doc_id(d) for d in docs]
    named = [f"{shortest_unique(i, ids)} ({' '.join(d.split())[:40]!r})"
             for i, d in list(zip(ids, docs))[:SHOWN_CANDIDATES]]
    more = len(docs) - len(named)
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")


def cli_user(cwd: str | Path | None = None) -> str:
    """Who a change from this terminal is recorded as: the person git knows (`user.name
    <user.email>` of the repository at `cwd`, else the global config), else the login name and
    the machine (no git, or no name set)."""
    name, email = _git_config("user.name", cwd), _git_config("user.email", cwd)
    if name or email:
        return f"{name} <{email}>" if name and email else (name or email)
    try:
        login = getpass.getuser()
    except Exception:  # no login name (a container without one)
        login = "unknown"
    return f"{login}@{socket.gethostname()}"


def _git_config(key: str, cwd: str | Path | None) -> str:
    from orchestrator.errors import GitError
    from orchestrator.gitrun import git

    try:
        done = git(cwd or ".", "config", "--get", key, check=False)
    except GitError:  # no git here: the login name instead
        return ""
    return " ".join(done.stdout.split()) if done.returncode == 0 else ""


# -- what the states do to recall --------------------------------------------------------------

def replacement(states: Mapping[str, MemoryState], ident: str) -> MemoryState | None:
    """The live doc that replaces doc `ident` at the end of its supersede chain, or None."""
    seen = {ident}
    state = states.get(ident)
    current = None
    while state is not None and state["superseded_by"] and state["superseded_by"] not in seen:
        seen.add(state["superseded_by"])
        current = states.get(state["superseded_by"])
        state = current
    return current


def curate(result: RetrieveResult, states: Mapping[str, MemoryState],
           limit: int | None = None) -> RetrieveResult:
    """A retrieve result with people's supersede links applied: a superseded doc is kept, right
    below its replacement (brought in at its score when the backend did not return it), and
    marked in `superseded` with `"by_hand": True`. The result holds as many current docs as
    the backend gave, or up to `limit` (what was asked for) when the backend gave fewer (a
    keyword backend returns only the docs that share the query's words, and a replacement that
    shares none must not push out the doc it replaces); what falls off the end is the least
    relevant, and a superseded doc is never cut from right below its replacement: it is the
    history that says why. Marks the backend made (its own amendments) are kept."""
    docs, scores = list(result["docs"]), list(result["doc_scores"])
    if not docs or not any(_superseded(states, doc_id(d)) for d in docs):
        return result
    marked = {(docs[m["doc"]], docs[m["by"]]): m for m in result.get("superseded", [])
              if 0 <= m.get("doc", -1) < len(docs) and 0 <= m.get("by", -1) < len(docs)}
    placed: list[tuple[str, float]] = []
    by_hand: list[tuple[str, str, MemoryState]] = []
    for doc, score in zip(docs, scores):
        if any(doc == d for d, _ in placed):
            continue
        new = replacement(states, doc_id(doc))
        if new is not None:
            if not any(new["doc"] == d for d, _ in placed):
                placed.append((new["doc"], score))
            by_hand.append((doc, new["doc"], new))
        placed.append((doc, score))
    placed = _keep(placed, {old for old, _, _ in by_hand}, max(len(docs), limit or 0))
    at = {doc: pos for pos, (doc, _) in enumerate(placed)}
    marks = [{**mark, "doc": at[old], "by": at[new]} for (old, new), mark in marked.items()
             if old in at and new in at]
    marks += [{"doc": at[old], "by": at[new_doc], "date": "", "by_date": (state["added_at"] or "")[:10],
               "by_hand": True} for old, new_doc, state in by_hand if old in at and new_doc in at]
    curated: RetrieveResult = {"question": result["question"], "docs": [d for d, _ in placed],
                               "doc_scores": [s for _, s in placed]}
    if marks:
        curated["superseded"] = sorted(marks, key=lambda m: m["doc"])
    return curated


def _keep(placed: list[tuple[str, float]], history: set[str], room: int) -> list[tuple[str, float]]:
    """The first `room` current docs of `placed`, each with the superseded docs right below it."""
    kept: list[tuple[str, float]] = []
    current = 0
    for doc, score in placed:
        if doc in history and kept:
            kept.append((doc, score))
            continue
        if current == room:
            break
        current += 1
        kept.append((doc, score))
    return kept


def _superseded(states: Mapping[str, MemoryState], ident: str) -> str | None:
    state = states.get(ident)
    return state["superseded_by"] if state is not None else None


def pinned_docs(states: Mapping[str, MemoryState]) -> list[str]:
    """The live pinned docs, oldest pin first (always shown to the agent, within the budget);
    an expired one is not live."""
    gone = expired_ids(states)
    pinned = [s for s in states.values() if s["pinned"] and not s["superseded_by"]
              and s["doc_id"] not in gone]
    return [s["doc"] for s in sorted(pinned, key=lambda s: s["added_at"] or "")]


def curation_notes(states: Mapping[str, MemoryState]) -> dict[str, str]:
    """What people said of each doc, as a backend that derives text from many docs marks it
    (MemoryBackend.apply_curation): doc text -> "superseded by [id]", "expired" or "pinned"."""
    gone = expired_ids(states)
    notes: dict[str, str] = {}
    for key, state in states.items():
        new = replacement(states, key) if state["superseded_by"] else None
        if new is not None:
            notes[state["doc"]] = f"superseded by [{short(new['doc_id'])}]"
        elif key in gone:
            notes[state["doc"]] = "expired"
        elif state["pinned"]:
            notes[state["doc"]] = "pinned"
    return notes


def current_text(states: Mapping[str, MemoryState], doc: str) -> str:
    """A doc as the agent should read it now: its replacement's text when it was superseded."""
    new = replacement(states, doc_id(doc))
    return new["doc"] if new is not None else doc


# -- in words (`middle memory show|history`, the board) -------------------------------------------

def origin_line(shown: dict[str, Any]) -> str:
    """Where a doc came from, in words: the tickets (and runs) that indexed it, or its import
    or hand entry, with when and by whom."""
    lines = []
    for source in shown["tickets"]:
        run = f", run {source['run_id'][:12]}" if source.get("run_id") else ""
        gone = f", reverted {source['deleted_at'][:19]}" if source.get("deleted_at") else ""
        ran = f" (run by {source['by']})" if source.get("by") else ""
        lines.append(f"ticket {source['ticket_id']}{ran}{run}, indexed {source['indexed_at'][:19]}{gone}")
    origin = shown.get("origin") or {}
    kind = origin.get("kind")
    who = f" by {shown['added_by']}" if shown.get("added_by") else ""
    when = f" {shown['added_at'][:19]}" if shown.get("added_at") else ""
    if kind == "commit":
        lines.append(f"imported from commit {origin.get('commit', '?')[:12]}"
                     + (f" ({origin['author']})" if origin.get("author") else "") + f",{when}{who}")
    elif kind in ("file", "transcript"):
        lines.append(f"imported from the {kind} {origin.get('path', '?')},{when}{who}")
    elif kind == "supersede":
        of = str(origin.get("of", "?"))
        lines.append(f"written to supersede {(shown.get('short_ids') or {}).get(of) or of[:DOC_ID_CHARS]},{when}{who}")
    elif kind == "hand":
        lines.append(f"added by hand,{when}{who}")
    elif kind == "api":
        lines.append(f"added through the HTTP API,{when}{who}")
    elif kind == "derived":
        lines.append(f"no doc: {origin.get('what', 'made by the backend')} (change those docs, "
                     "and this follows)")
    elif kind and kind != "ticket":
        lines.append(f"{kind},{when}{who}")
    return "; ".join(lines) or "unknown (indexed before sources were recorded, or by the backend)"


def change_ids(changes: list[Mapping[str, Any]]) -> list[str]:
    """The whole ids of the docs `changes` name (describe_change shows each by its short id)."""
    out: list[str] = []
    for change in changes:
        after = change.get("after") or {}
        out.append(str(change["doc_id"]))
        if change["action"] == "edit":
            out.append(doc_id(after.get("doc", "")))
        elif after.get("by"):
            out.append(str(after["by"]))
    return list(dict.fromkeys(i for i in out if i))


def describe_change(change: Mapping[str, Any], ids: Mapping[str, str] | None = None) -> str:
    """One change in words: what was done to which doc, before and after. `ids`: the id each
    doc is shown by (MemoryFacade.short_ids of change_ids), where not its first DOC_ID_CHARS."""
    def name(ident: str) -> str:
        return (ids or {}).get(ident) or ident[:DOC_ID_CHARS]

    before, after = change.get("before") or {}, change.get("after") or {}
    ident = name(change["doc_id"])
    action = change["action"]
    if action == "edit":
        return (f"edited {ident} -> {name(doc_id(after.get('doc', '')))}: "
                f"before {_quote(before.get('doc'))}, after {_quote(after.get('doc'))}")
    if action == "supersede":
        return f"superseded {ident} by {name(str(after.get('by', '')))}: {_quote(after.get('doc'))}"
    if action in ("pin", "unpin"):
        return f"{action}ned {ident}"
    if action == "forget":
        return f"deleted {ident}: {_quote(before.get('doc'))}"
    if action == "add":
        return f"added {ident}: {_quote(after.get('doc'))}"
    if action == "undo":
        return f"undid change {change.get('undoes')} (doc {ident})"
    if action == "expire":
        until = after.get("valid_until")
        return f"set {ident} valid until {until[:19]}" if until else f"set {ident} valid with no end"
    if action == "bulk":
        count = len(before.get("docs", []))
        what = (f"superseded {count} docs by {name(str(after.get('by', '')))}"
                if after.get("action") == "supersede" else f"deleted {count} docs")
        return f"{what} ({after.get('filter') or 'a filtered list'})"
    return f"{action} {ident}"


def _quote(text: Any, limit: int = 120) -> str:
    text = " ".join(str(text or "").split())
    return repr(text if len(text) <= limit else text[:limit - 1] + "…")



SOURCE_KINDS = ("ticket", "commit", "file", "transcript", "hand", "api", "supersede", "unknown")


UNUSED_AFTER = 3  # runs that recalled a memory without using it before the board says so


def unused_note(uses: Mapping[str, int] | None) -> str | None:
    """What the board says of a memory recalled often and never used (see TicketQueries.memory_usage)."""
    if uses and uses["recalled"] >= UNUSED_AFTER and not uses["used"]:
        return (f"recalled in {uses['recalled']} runs, never used: a candidate to supersede or "
                "forget")
    return None


# -- the verbs ---------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What a verb did, for the CLI's line and the API's answer."""

    change: int | None  # the change recorded (None: nothing to change)
    doc: str  # the doc the verb acted on (after it: the new text of an edit)
    old: str | None = None  # an edit's or supersede's doc before
    message: str = ""

    def as_json(self, ids: Mapping[str, str] | None = None) -> dict[str, Any]:
        """`ids`: the id each doc is shown by (MemoryFacade.short_ids), where not its first
        DOC_ID_CHARS."""
        def name(doc: str) -> str:
            return (ids or {}).get(doc_id(doc)) or short(doc_id(doc))

        return {"change": self.change, "id": name(self.doc), "doc": self.doc,
                "old": self.old, "old_id": name(self.old) if self.old else None,
                "message": self.message}

    def shown(self, facade: "CuratedMemory", project_id: str) -> dict[str, Any]:
        """as_json with the ids that tell its docs from every other doc of the store."""
        return self.as_json(facade.short_ids(project_id, [doc_id(d) for d in (self.doc, self.old) if d]))


UNFINISHED = "unfinished"  # in a state's origin: the verb that indexed the doc has not recorded it yet (_intend)


class Curator:
    """The curation verbs on one project memory (facade) and its record (ticket store)."""

    def __init__(self, facade: CuratedMemory, store: TicketStore):
        self.facade = facade
        self.store = store

    # -- finding ---------------------------------------------------------------------------
    def find(self, project_id: str, ident: str) -> str:
        """The doc `ident` names (its exact text, or 4+ hex characters of its id)."""
        key = (ident or "").strip()
        if not key:
            raise CurationError("give the doc's id (the 8 characters `middle memory list` shows) "
                                "or its exact text")
        # the store is asked for this text or id (find_docs), not listed: quick at 100,000 docs
        found = self.facade.find_docs(project_id, ident)
        if found == [ident]:
            return ident
        low = key.lower()
        if len(low) < 4 or any(c not in "0123456789abcdef" for c in low):
            raise MemoryDocNotFound(
                f"no doc in project {project_id!r} has exactly that text, and {short(key)!r} is no "
                "doc id (4 or more of the hex characters `middle memory list` shows): nothing was "
                "changed")
        if not found:
            raise MemoryDocNotFound(f"no doc in project {project_id!r} has an id starting "
                                    f"{low!r}: `middle memory list` shows the ids")
        if len(set(found)) > 1:
            raise CurationError(f"id {low!r} starts {len(found)} docs' ids in project "
                                f"{project_id!r}: {candidates(found)}; give more of it")
        return found[0]

    def states(self, project_id: str, ids: Iterable[str] | None = None) -> dict[str, MemoryState]:
        """The project's curation states (every one), or, with `ids`, only those a verb on
        those docs reads, by key (quick at 100,000 docs): theirs, the docs they supersede, and
        their replacements to the end of each supersede chain (with the docs those supersede).
        `replacement`, `_superseded` and `_moved` answer alike on either."""
        if ids is None:
            return self.store.memory_state(project_id)
        states: dict[str, MemoryState] = {}
        asked: set[str] = set()
        wanted = set(ids)
        while wanted:  # a chain is a few links long: a keyed read per link
            asked |= wanted
            states.update(self.store.memory_state_for(project_id, wanted))
            wanted = {s["superseded_by"] for s in states.values() if s["superseded_by"]} - asked
        return states

    # -- reading ---------------------------------------------------------------------------
    def show(self, project_id: str, ident: str) -> dict[str, Any]:
        """A doc with where it came from, what it superseded or what superseded it, and its
        changes (following it through its edits)."""
        try:
            doc = self.find(project_id, ident)
        except MemoryDocNotFound:
            derived = self._derived(project_id, ident)
            if derived is None:
                raise
            return derived
        key = doc_id(doc)
        states = self.states(project_id, [key])
        state = states.get(key)
        own: dict[str, Any] = dict(state) if state is not None else {}
        runners = self.store.ticket_runners(project_id)
        tickets = [{**t, "by": runners.get(t["ticket_id"])}
                   for t in self.store.doc_sources(project_id, doc).get(doc, [])]
        new = replacement(states, key)
        supersedes = [s for s in states.values() if s["superseded_by"] == key]
        ids = {key} | _earlier_ids(self.store, project_id, key)
        # the ids a person is shown: each told from every other doc (usage is kept by short(key))
        origin = own.get("origin") or ({"kind": "ticket"} if tickets else None)
        of = [str(origin["of"])] if origin and origin.get("kind") == "supersede" and origin.get("of") else []
        shown = self.facade.short_ids(project_id, [key, *([new["doc_id"]] if new else []),
                                                   *(s["doc_id"] for s in supersedes), *of])
        return {
            "id": key, "short_id": shown[key], "doc": doc, "project": project_id, "tickets": tickets,
            "origin": origin,
            # every id this answer names, as a person is shown it (origin_line reads them)
            "short_ids": shown,
            "added_by": own.get("added_by"), "added_at": own.get("added_at"),
            "pinned": bool(state and state["pinned"]),
            "valid_until": own.get("valid_until"), "validity": expiry_note(state),
            "superseded_by": None if new is None else {"id": new["doc_id"], "short_id": shown[new["doc_id"]],
                                                        "doc": new["doc"], "at": new["added_at"]},
            "supersedes": [{"id": s["doc_id"], "short_id": shown[s["doc_id"]], "doc": s["doc"]}
                           for s in supersedes],
            "changes": self.store.memory_changes(project_id, doc_ids=ids),
        }

    def _derived(self, project_id: str, ident: str) -> dict[str, Any] | None:
        """A text the backend's recall shows that is no doc (a summary of many), as `show`
        gives it: what it is made from; its docs are the ones to change."""
        low = (ident or "").strip().lower()
        for text, what in self.facade.derived_texts(project_id):
            key = doc_id(text)
            if text == ident or (len(low) >= 4 and key.startswith(low)):
                return {"id": key, "short_id": short(key), "doc": text, "project": project_id,
                        "tickets": [], "origin": {"kind": "derived", "what": what},
                        "added_by": None, "added_at": None, "pinned": False, "valid_until": None,
                        "validity": None, "superseded_by": None, "supersedes": [], "changes": [],
                        "derived": what}
        return None

    def changes(self, project_id: str, limit: int = 200) -> list[MemoryChange]:
        return self.store.memory_changes(project_id, limit=limit)

    # -- changing --------------------------------------------------------------------------
    def add(self, project_id: str, text: str, who: str, origin: dict[str, Any] | None = None,
            valid_until: str | None = None, option: str = "--valid-until") -> Outcome:
        """Index `text` as a doc of its own (refused over max_doc_chars), recorded as added;
        `valid_until` (a date, see memory.timeline; `option`: its name in a mistake's words):
        it leaves recall then."""
        until = parse_when(valid_until, option, end_of_day=True) if valid_until else None
        doc = self.facade.prepare_doc(text, refuse_long=True)
        with self.facade.project_lock(project_id, "add"):
            if self.facade.has_doc(project_id, doc):
                if not self._unrecorded(project_id, doc):
                    return Outcome(None, doc, message="already in memory: nothing added")
                # else an add killed before its change was recorded: recorded now
            else:
                self._intend(project_id, doc, "add", who)
                self.facade.index(project_id, [doc])
                point("memory.curated")
            state = {**self._new_state(doc, origin or {"kind": "hand"}, who), "valid_until": until}
            change = self.store.record_memory_change(
                project_id, "add", doc_id(doc), who=who, after={"doc": doc, "valid_until": until},
                put=[state])  # type: ignore[list-item]
        return Outcome(change, doc, message="added")

    def set_valid_until(self, project_id: str, ident: str, valid_until: str | None, who: str,
                        option: str = "--valid-until") -> Outcome:
        """Set (a date) or clear (None, or "never") when a doc stops being valid: an expired
        doc leaves recall and is shown as expired; `undo` puts the old validity back."""
        until = (None if valid_until is None or valid_until.strip().lower() in ("never", "")
                 else parse_when(valid_until, option, end_of_day=True))
        with self.facade.project_lock(project_id, "expire"):
            doc = self.find(project_id, ident)
            key = doc_id(doc)
            state = self.states(project_id, [key]).get(key) or self._new_state(doc, None, who)
            if state.get("valid_until") == until:
                return Outcome(None, doc, message="validity unchanged")
            change = self.store.record_memory_change(
                project_id, "expire", key, who=who, before={"valid_until": state.get("valid_until")},
                after={"valid_until": until}, put=[{**state, "valid_until": until}])
        return Outcome(change, doc, message=expiry_note({"valid_until": until}) or "valid with no end")

    def edit(self, project_id: str, ident: str, text: str, who: str) -> Outcome:
        """Replace a doc's text: re-embedded and re-indexed alone (its time kept where the
        backend keeps times), its pins, supersede links and ticket records moved to the new
        text, the old text kept in the change (undo puts it back)."""
        new = self._new_text(text)
        with self.facade.project_lock(project_id, "edit"):
            old = self.find(project_id, ident)
            if new == old:
                raise CurationError("the new text is the doc's text: nothing to change")
            last = self._last_change(project_id, doc_id(old))
            if (last is not None and last["action"] == "edit" and (last["after"] or {}).get("doc") == new
                    and self.facade.has_doc(project_id, new)):  # killed after recording it: finished now
                self._finish_replace(project_id, old, new)
                return Outcome(last["id"], new, old, "edited")
            if self.facade.has_doc(project_id, new) and not self._unrecorded(project_id, new):
                raise CurationError(f"another doc ({short(doc_id(new))}) has that text already: "
                                    "forget this one instead (`middle memory delete`)")
            put, drop = _moved(self.states(project_id, [doc_id(old)]), doc_id(old), new)
            change = self._replace(project_id, old, new, lambda: self.store.record_memory_change(
                project_id, "edit", doc_id(old), who=who, before={"doc": old},
                after={"doc": new, "doc_id": doc_id(new)}, put=put, drop=drop), who)
        return Outcome(change, new, old, "edited")

    def supersede(self, project_id: str, ident: str, text: str, who: str) -> Outcome:
        """Index `text` as the doc that replaces `ident`; the old one is kept and marked, and
        ranks right below its replacement from now on."""
        new = self._new_text(text)
        with self.facade.project_lock(project_id, "supersede"):
            old = self.find(project_id, ident)
            key = doc_id(old)
            states = self.states(project_id, [key])
            if _superseded(states, key):
                later = replacement(states, key)
                name = short(later["doc_id"]) if later else short(_superseded(states, key) or "")
                raise CurationError(f"doc {short(key)} was already superseded by {name}: "
                                    f"supersede that one instead (`middle memory supersede {name} "
                                    "--with TEXT`), or undo the first supersede")
            if new == old or (self.facade.has_doc(project_id, new) and not self._unrecorded(project_id, new)):
                raise CurationError(f"a doc with that text is in memory already "
                                    f"({short(doc_id(new))}): give the new wording")
            if not self.facade.has_doc(project_id, new):  # (else a supersede killed before its record)
                self._intend(project_id, new, "supersede", who)
                self.facade.index(project_id, [new])
                point("memory.curated")
            old_state = states.get(key) or self._new_state(old, None, who)
            change = self.store.record_memory_change(
                project_id, "supersede", key, who=who, before={"superseded_by": None},
                after={"by": doc_id(new), "doc": new},
                put=[{**old_state, "superseded_by": doc_id(new)},
                     self._new_state(new, {"kind": "supersede", "of": key}, who)])
        return Outcome(change, new, old, "superseded")

    def pin(self, project_id: str, ident: str, who: str, pinned: bool = True) -> Outcome:
        """Pin (always in the agent's block, within its budget) or unpin a doc."""
        with self.facade.project_lock(project_id, "pin"):
            doc = self.find(project_id, ident)
            key = doc_id(doc)
            states = self.states(project_id, [key])
            state = states.get(key) or self._new_state(doc, None, who)
            if pinned and state["superseded_by"]:
                later = replacement(states, key)
                raise CurationError(f"doc {short(key)} was superseded by "
                                    f"{short(later['doc_id']) if later else '?'}: pin that one")
            if state["pinned"] == pinned:
                return Outcome(None, doc, message="already pinned" if pinned else "not pinned")
            change = self.store.record_memory_change(
                project_id, "pin" if pinned else "unpin", key, who=who,
                before={"pinned": not pinned}, after={"pinned": pinned},
                put=[{**state, "pinned": pinned}])
        return Outcome(change, doc, message=self._pins_note(project_id) if pinned else "unpinned")

    def _pins_note(self, project_id: str) -> str:
        """"pinned", and when the project's pins go past the block's room for them, that a pin
        reaches the agent only when a query finds it (memory.format.place_pins): the person who
        pinned it is told at once, on the CLI, the API and the board."""
        shown, total = self.facade.pins_shown(project_id)
        if total <= shown:
            return "pinned"
        return (f"pinned; note: {total} docs are pinned, and the agent's block puts {shown} of them "
                "first (those a query finds, then the oldest, within half its related part), the "
                "others only as room is left: unpin some (`middle memory list` marks them)")

    def forget(self, project_id: str, ident: str, who: str) -> Outcome:
        """Delete a doc from memory; the change keeps its text, time and state (undo puts it back)."""
        # Recorded first, deleted from the store last: the record keeps the text, time and state
        # that undo needs, so a kill between leaves a doc still in memory that this verb, run
        # again, deletes (deleted first, a kill would lose what undo puts back).
        with self.facade.project_lock(project_id, "delete"):
            doc = self.find(project_id, ident)
            key = doc_id(doc)
            last = self._last_change(project_id, key)
            if last is not None and last["action"] == "forget" and last["undone_by"] is None:
                self.facade.delete(project_id, [doc])  # killed after recording it: finished now
                return Outcome(last["id"], doc, message="deleted")
            when = self.facade.doc_time(project_id, doc)
            self.store.set_memory_docs_deleted(project_id, doc, True)
            state = self.states(project_id, [key]).get(key)
            change = self.store.record_memory_change(
                project_id, "forget", key, who=who,
                before={"doc": doc, "time": when, "state": dict(state) if state else None},
                drop=[key])
            point("memory.recorded")
            if not self.facade.delete(project_id, [doc]):
                raise MemoryDocNotFound(f"doc {short(key)} is not in memory any more")
        return Outcome(change, doc, message="deleted")

    def undo(self, project_id: str, change_id: int, who: str) -> Outcome:
        """Take back one change (which must not be undone already, nor followed by a change
        to the same doc that depends on it)."""
        with self.facade.project_lock(project_id, "undo"):
            change = self.store.memory_change(project_id, change_id)
            if change is None:
                raise MemoryDocNotFound(f"project {project_id!r} has no memory change {change_id}: "
                                        "`middle memory history` lists them")
            if change["undone_by"] is not None:
                if change["action"] == "edit" and self._finish_undone_edit(project_id, change):
                    return Outcome(change["undone_by"], (change["before"] or {})["doc"],
                                   message="undid the edit")
                raise CurationError(f"change {change_id} was undone already (by change "
                                    f"{change['undone_by']})")
            if change["action"] == "undo":
                raise CurationError(f"change {change_id} is an undo: undo change "
                                    f"{change['undoes']} again instead of undoing the undo")
            return self._undo(project_id, change, who)

    def undoable(self, project_id: str, changes: list[MemoryChange],
                 has: Callable[[str], bool] | None = None,
                 states: Mapping[str, MemoryState] | None = None) -> list[tuple[MemoryChange, bool]]:
        """Each change with whether `undo` would take it back now (the board offers Undo only
        then): not undone yet, not an undo, and the doc it needs still as it left it. `has`:
        whether the store holds a doc, `states` the curation states, when the caller has them
        (default: ask the backend and the ticket store)."""
        def held(doc: str) -> bool:
            return has(doc) if has is not None else self.facade.has_doc(project_id, doc)

        marked = []
        for change in changes:
            action, after = change["action"], change["after"] or {}
            if change["undone_by"] is not None or action == "undo":
                ok = False
            elif action in ("pin", "unpin"):
                current = self._current_id(project_id, change["doc_id"])
                state = (self.states(project_id, [current]) if states is None else states).get(current)
                ok = state is not None and held(state["doc"])
            elif action in ("edit", "supersede") or (action == "bulk" and after.get("action") == "supersede"):
                ok = isinstance(after.get("doc"), str) and held(after["doc"])
            elif action == "bulk":  # a bulk forget: its undo puts back whatever is missing
                ok = True
            else:
                ok = action in ("forget", "add")
            marked.append((change, ok))
        return marked

    # -- helpers ---------------------------------------------------------------------------
    def _undo(self, project_id: str, change: MemoryChange, who: str) -> Outcome:
        """Undo one change, reading only the docs and states it touched (by id: the store is
        not listed, the states not read whole, so an undo is as quick at 100,000 docs)."""
        action, before, after = change["action"], change["before"] or {}, change["after"] or {}
        record: dict[str, Any] = {"who": who, "undoes": change["id"], "before": after or None,
                                  "after": before or None}
        if action in ("pin", "unpin", "expire"):
            current = self._current_id(project_id, change["doc_id"])
            state = self.states(project_id, [current]).get(current)
            if state is None or not self.facade.docs_present(project_id, [state["doc"]]):
                raise self._gone(change)
            back: MemoryState = ({**state, "pinned": bool(before["pinned"])} if action != "expire"
                                 else {**state, "valid_until": before.get("valid_until")})
            cid = self.store.record_memory_change(project_id, "undo", state["doc_id"], put=[back],
                                                  **record)
            return Outcome(cid, state["doc"], message=f"undid the {action}")
        if action == "bulk":
            return self._undo_bulk(project_id, change, record)
        touched = [d for d in (after.get("doc"), before.get("doc")) if isinstance(d, str)]
        live = self.facade.docs_present(project_id, touched)
        if action == "edit":
            new, old = after["doc"], before["doc"]
            if new not in live:
                raise self._gone(change)
            put, drop = _moved(self.states(project_id, [doc_id(new)]), doc_id(new), old)
            cid = self._replace(project_id, new, old, lambda: self.store.record_memory_change(
                project_id, "undo", doc_id(new), put=put, drop=drop, **record), record["who"])
            return Outcome(cid, old, new, "undid the edit")
        if action == "supersede":
            new = after["doc"]
            states = self.states(project_id, [change["doc_id"]])
            old_state = states.get(change["doc_id"])
            if new not in live and not _undo_killed(states, [change["doc_id"]], new):
                raise self._gone(change)
            self.facade.delete(project_id, [new])
            point("memory.removed")
            put = [{**old_state, "superseded_by": None}] if old_state else []
            cid = self.store.record_memory_change(project_id, "undo", change["doc_id"], put=put,
                                                  drop=[doc_id(new)], **record)
            return Outcome(cid, old_state["doc"] if old_state else new, new, "undid the supersede")
        if action == "forget":
            doc = before["doc"]
            if doc not in live:  # (else an undo killed before its record: put back already)
                self.facade.index_records(project_id, [(doc, before.get("time"))])
                point("memory.curated")
            self.store.set_memory_docs_deleted(project_id, doc, False)
            put = [before["state"]] if before.get("state") else []
            cid = self.store.record_memory_change(project_id, "undo", change["doc_id"], put=put, **record)
            return Outcome(cid, doc, message="undid the delete")
        if action == "add":
            doc = after["doc"]
            if doc in live:  # (else an undo killed before its record: deleted already)
                self.facade.delete(project_id, [doc])
                point("memory.removed")
            cid = self.store.record_memory_change(project_id, "undo", change["doc_id"],
                                                  drop=[change["doc_id"]], **record)
            return Outcome(cid, doc, message="undid the add")
        raise CurationError(f"change {change['id']} ({action}) cannot be undone")

    def _undo_bulk(self, project_id: str, change: MemoryChange, record: dict[str, Any]) -> Outcome:
        """Take a bulk change (memory.bulk) back whole: every doc it deleted put back with its
        time and state, or every doc it superseded live again and its replacement gone."""
        before, after = change["before"] or {}, change["after"] or {}
        items = list(before.get("docs", []))
        if after.get("action") == "forget":
            live = self.facade.docs_present(project_id, [i["doc"] for i in items])
            back = [(i["doc"], i.get("time")) for i in items if i["doc"] not in live]
            if back:
                self.facade.index_records(project_id, back)
                point("memory.curated")
            for item in items:
                self.store.set_memory_docs_deleted(project_id, item["doc"], False)
            put = [i["state"] for i in items if i.get("state")]
            cid = self.store.record_memory_change(project_id, "undo", change["doc_id"], put=put,
                                                  **record)
            return Outcome(cid, items[0]["doc"] if items else "", message=f"put back {len(items)} docs")
        new = after.get("doc", "")
        states = self.states(project_id, [i["doc_id"] for i in items])
        if not isinstance(new, str) or (not self.facade.docs_present(project_id, [new])
                                        and not _undo_killed(states, [i["doc_id"] for i in items], new)):
            raise self._gone(change)
        self.facade.delete(project_id, [new])
        point("memory.removed")
        put = [i["state"] or {**states[i["doc_id"]], "superseded_by": None}
               for i in items if i.get("state") or i["doc_id"] in states]
        cid = self.store.record_memory_change(project_id, "undo", change["doc_id"], put=put,
                                              drop=[doc_id(new)], **record)
        return Outcome(cid, new, message=f"undid the supersede of {len(items)} docs")

    def _current_id(self, project_id: str, ident: str) -> str:
        """The id doc `ident` has now, following its edits (those not undone)."""
        edits = {c["doc_id"]: str((c["after"] or {}).get("doc_id")) for c in
                 reversed(self.store.memory_changes(project_id, limit=100_000, action="edit"))
                 if c["undone_by"] is None}
        seen = {ident}
        while ident in edits and edits[ident] not in seen:
            ident = edits[ident]
            seen.add(ident)
        return ident

    def _gone(self, change: MemoryChange) -> CurationError:
        return CurationError(f"change {change['id']} cannot be undone: its doc was changed since "
                             "(`middle memory history` shows by which change; undo that first)")

    def _replace(self, project_id: str, old: str, new: str, record: Callable[[], int], who: str) -> int:
        """`new` indexed in `old`'s place (at its time), the change recorded (`record`, its id
        returned), then the tickets that indexed `old` made to own `new` (so `middle revert`
        deletes the edit) and `old` deleted. In that order a kill anywhere leaves both docs,
        never neither: before the record `new` is in memory unrecorded (the edit run again
        takes it as its own), after it the same edit (or undo) run again finishes the rest."""
        if not self.facade.docs_present(project_id, [new]):
            self._intend(project_id, new, "edit", who)
            self.facade.index_records(project_id, [(new, self.facade.doc_time(project_id, old))])
            point("memory.curated")
        change = record()
        point("memory.recorded")
        self._finish_replace(project_id, old, new)
        return change

    def _finish_replace(self, project_id: str, old: str, new: str) -> None:
        self.store.replace_memory_doc(project_id, old, new)
        self.facade.delete(project_id, [old])

    def _finish_undone_edit(self, project_id: str, change: MemoryChange) -> bool:
        """An undo of edit `change` killed after it was recorded leaves the edited text beside
        the one it put back: deleted now (True), else False (the undo was whole)."""
        new, old = (change["after"] or {}).get("doc"), (change["before"] or {}).get("doc")
        if not (isinstance(new, str) and isinstance(old, str)):
            return False
        if (self.facade.docs_present(project_id, [new, old]) != {new, old}
                or self.store.memory_state_for(project_id, {doc_id(new)})):  # (added again since)
            return False
        self._finish_replace(project_id, new, old)
        return True

    def _intend(self, project_id: str, doc: str, verb: str, who: str) -> None:
        """Before a verb indexes a new doc: a state saying the verb started it (UNFINISHED in its
        origin), which the verb's recorded change then replaces. A kill in between leaves the
        doc in memory with this mark, so the same verb run again knows the doc for its own
        (_unrecorded); a doc nothing marks (another program's, a raw API index) is never taken."""
        self.store.note_memory_origins(project_id, [(doc_id(doc), doc, {"kind": verb, UNFINISHED: True})], who)

    def _unrecorded(self, project_id: str, doc: str) -> bool:
        """A doc in memory whose verb was killed between indexing it and recording its change
        (its state still carries _intend's mark): the same verb run again takes it as its own
        and records the change."""
        key = doc_id(doc)
        state = self.store.memory_state_for(project_id, {key}).get(key)
        return (self.facade.has_doc(project_id, doc) and state is not None
                and bool((state.get("origin") or {}).get(UNFINISHED)))

    def _last_change(self, project_id: str, key: str) -> MemoryChange | None:
        """The newest change recorded of doc `key` (a verb run again after a kill finds its own)."""
        changes = self.store.memory_changes(project_id, doc_ids=[key], limit=1)
        return changes[0] if changes else None

    def _new_text(self, text: str) -> str:
        if not isinstance(text, str) or not text.strip():
            raise CurationError("the new text is empty: give the doc's words")
        return self.facade.prepare_doc(text, refuse_long=True)

    @staticmethod
    def _new_state(doc: str, origin: dict[str, Any] | None, who: str) -> MemoryState:
        from tickets.model import utc_now

        return {"doc_id": doc_id(doc), "doc": doc, "pinned": False, "superseded_by": None,
                "origin": origin, "added_by": who, "added_at": utc_now(), "valid_until": None}


def _moved(states: Mapping[str, MemoryState], old_id: str, new: str) -> tuple[list[MemoryState], list[str]]:
    """The state rows an edit writes: the doc's own row under its new id, and every supersede
    link that pointed at the old id pointed at the new one."""
    new_id = doc_id(new)
    put: list[MemoryState] = []
    own = states.get(old_id)
    if own is not None:
        put.append({**own, "doc_id": new_id, "doc": new})
    put += [{**s, "superseded_by": new_id} for s in states.values()
            if s["superseded_by"] == old_id and s["doc_id"] != old_id]
    # the old id's row goes; with none to move, the new id's (the mark _intend left) goes too
    return put, [old_id] if own is not None else [new_id]


def _undo_killed(states: Mapping[str, MemoryState], superseded: list[str], new: str) -> bool:
    """Whether an undo of a supersede was killed after deleting the replacement `new` and before
    recording itself: the docs it superseded still point at it and its own state is still there
    (a replacement deleted by hand, `middle memory delete`, has its state dropped)."""
    key = doc_id(new)
    return key in states and any(i in states and states[i]["superseded_by"] == key for i in superseded)


def _earlier_ids(store: TicketStore, project_id: str, ident: str) -> set[str]:
    """The ids a doc had before its edits (its history follows it)."""
    ids: set[str] = set()
    frontier = {ident}
    changes = store.memory_changes(project_id, limit=10_000, action="edit")
    while frontier:
        found = {c["doc_id"] for c in changes if (c["after"] or {}).get("doc_id") in frontier}
        frontier = found - ids
        ids |= found
    return ids
