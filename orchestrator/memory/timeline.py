"""Memory over time: a doc's expiry (`valid_until`) and what memory said at a date (`--as-of`).

Times are ISO-8601 UTC text, as the ticket store writes them (sortable as text). A date a person
gives (`2026-03-01`, `2026-03-01T14:00`, with or without an offset) is read by `parse_when`:
a bare date means the start of that day (UTC) for `--before`/`--after`, the end of it for
`--valid-until` (valid through that day) and `--as-of` (memory as it stood by the end of it).

What memory said at a date is rebuilt from what is already recorded, never from a snapshot:
the docs held now, the ticket records of docs a revert deleted, and the curation record
(`memory_changes`: every add, edit, supersede, forget, expiry and undo keeps the text or state
it needs to be undone), rolled back change by change from the newest to the date.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from orchestrator.errors import MemoryStoreError
from orchestrator.memory.format import doc_id

if TYPE_CHECKING:
    from tickets.curation import MemoryChange, MemoryState


class DateError(MemoryStoreError, ValueError):
    """A date a person gave that cannot be read (400 over HTTP): nothing was changed."""


def parse_when(text: str, option: str, *, end_of_day: bool = False) -> str:
    """The instant `text` names, as ISO UTC text; a bare date is its day's start (or, with
    `end_of_day`, the start of the next day). A DateError saying how to write it otherwise."""
    raw = (text or "").strip()
    try:
        if len(raw) == 10:
            day = date.fromisoformat(raw)
            moment = datetime.combine(day + timedelta(days=1 if end_of_day else 0), time(),
                                      tzinfo=timezone.utc)
        else:
            moment = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
    except ValueError:
        raise DateError(f"{option} {text!r} is not a date: write it as YYYY-MM-DD (e.g. "
                        "2026-03-01) or YYYY-MM-DDTHH:MM with an optional offset") from None
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def is_expired(state: Mapping[str, Any] | None, at: str | None = None) -> bool:
    """Whether a doc's state says it expired by `at` (default: now)."""
    until = state.get("valid_until") if state is not None else None
    return bool(until) and str(until) <= (at or now_iso())


def expired_ids(states: Mapping[str, Mapping[str, Any]], at: str | None = None) -> set[str]:
    """The ids of the docs expired by `at` (default: now): they leave recall."""
    moment = at or now_iso()
    return {key for key, state in states.items() if is_expired(state, moment)}


def expiry_note(state: Mapping[str, Any] | None, at: str | None = None) -> str | None:
    """How `list`/`show` and the board say a doc's validity: expired, or valid until when."""
    until = state.get("valid_until") if state is not None else None
    if not until:
        return None
    return f"expired {until[:19]}" if is_expired(state, at) else f"valid until {until[:19]}"


# -- what memory said at a date -----------------------------------------------------------------

@dataclass
class Then:
    """Memory at one instant: the texts it held, which were superseded, and validities."""

    texts: dict[str, None] = field(default_factory=dict)  # ordered set
    superseded: set[str] = field(default_factory=set)  # doc ids
    valid_until: dict[str, str | None] = field(default_factory=dict)  # doc id -> time
    successor: dict[str, str] = field(default_factory=dict)  # a text then -> its text now

    def held(self, at: str) -> list[str]:
        """The texts held then that were neither superseded nor expired then."""
        return [t for t in self.texts if doc_id(t) not in self.superseded
                and not (self.valid_until.get(doc_id(t)) or "9999") <= at]


def memory_at(at: str, docs_now: Iterable[str], states: Mapping[str, MemoryState],
              changes: list[MemoryChange], entered: Mapping[str, str | None],
              reverted: Iterable[tuple[str, str, str]]) -> Then:
    """Memory as it stood at `at`: the docs held now (`docs_now`, each entered memory at
    `entered[text]`, None when unknown: kept), docs a revert deleted since (`reverted`: text,
    indexed at, deleted at), and every curation change after `at` taken back, newest first
    (`changes`: the project's, newest first)."""
    then = Then()
    for text in docs_now:
        then.texts[text] = None
        then.successor[text] = text
    for key, state in states.items():
        if state.get("superseded_by"):
            then.superseded.add(key)
        then.valid_until[key] = state.get("valid_until")
    for text, indexed_at, deleted_at in reverted:
        if indexed_at <= at < deleted_at and text not in then.texts:
            then.texts[text] = None
    by_id = {c["id"]: c for c in changes}
    for change in changes:  # newest first
        if change["at"] <= at:
            break
        if change["action"] == "undo":
            undone = by_id.get(change["undoes"] or -1)
            if undone is not None:
                _forward(then, undone)
        else:
            _back(then, change, at)
    for text in list(then.texts):
        when = entered.get(then.successor.get(text, text))
        if when is not None and when > at:
            del then.texts[text]
    return then


def _back(then: Then, change: MemoryChange, at: str) -> None:
    """Take one change back (memory as it was just before it)."""
    action, before, after = change["action"], change["before"] or {}, change["after"] or {}
    if action == "add":
        then.texts.pop(after.get("doc", ""), None)
    elif action == "forget":
        state = before.get("state") or {}
        if not (state.get("added_at") or "") > at:  # a doc that entered after `at` was not there
            _put_text(then, before.get("doc"))
        if state.get("superseded_by"):
            then.superseded.add(change["doc_id"])
        then.valid_until[change["doc_id"]] = state.get("valid_until")
    elif action == "edit":
        _swap(then, after.get("doc"), before.get("doc"))
    elif action == "supersede":
        then.texts.pop(after.get("doc", ""), None)
        then.superseded.discard(change["doc_id"])
    elif action == "expire":
        then.valid_until[change["doc_id"]] = before.get("valid_until")
    elif action == "bulk":
        for item in before.get("docs", []):
            state = item.get("state") or {}
            if after.get("action") == "forget":
                if not (state.get("added_at") or "") > at:
                    _put_text(then, item.get("doc"))
                if state.get("superseded_by"):
                    then.superseded.add(item.get("doc_id", ""))
                then.valid_until[item.get("doc_id", "")] = state.get("valid_until")
            else:
                then.superseded.discard(item.get("doc_id", ""))
        if after.get("action") == "supersede":
            then.texts.pop(after.get("doc", ""), None)


def _forward(then: Then, change: MemoryChange) -> None:
    """Make one change again (taking back its undo)."""
    action, before, after = change["action"], change["before"] or {}, change["after"] or {}
    if action == "add":
        _put_text(then, after.get("doc"))
    elif action == "forget":
        then.texts.pop(before.get("doc", ""), None)
    elif action == "edit":
        _swap(then, before.get("doc"), after.get("doc"))
    elif action == "supersede":
        _put_text(then, after.get("doc"))
        then.superseded.add(change["doc_id"])
    elif action == "expire":
        then.valid_until[change["doc_id"]] = after.get("valid_until")
    elif action == "bulk":
        for item in before.get("docs", []):
            if after.get("action") == "forget":
                then.texts.pop(item.get("doc", ""), None)
            else:
                then.superseded.add(item.get("doc_id", ""))
        if after.get("action") == "supersede":
            _put_text(then, after.get("doc"))


def _put_text(then: Then, text: Any) -> None:
    if isinstance(text, str) and text:
        then.texts[text] = None


def _swap(then: Then, new: Any, old: Any) -> None:
    """`new` held in memory replaced by `old` (an edit taken back, or made again)."""
    if not isinstance(new, str) or not isinstance(old, str):
        return
    then.texts.pop(new, None)
    then.texts[old] = None
    then.successor[old] = then.successor.pop(new, new)
    if doc_id(new) in then.superseded:
        then.superseded.discard(doc_id(new))
        then.superseded.add(doc_id(old))
    then.valid_until[doc_id(old)] = then.valid_until.get(doc_id(new))
