"""The memory catalog: a project's docs as the board and the docs API list them, one page at a time.

A store of 100,000 docs must not reach the browser whole (3,000 docs made a 5.7 MB page): the
catalog filters (source, ticket, author, date range, pinned, superseded, expired, never used), sorts and
cuts one page server-side, and describes in full (origin in words, tickets, supersede links,
usage) only the docs of that page. Paging is by a keyset cursor (the last row's sort key and
id), not an offset, so paging on while docs are added or changed visits every doc at most once
and a doc that stays in place exactly once.

A server keeps a project's catalog and brings it up to date a few docs at a time (`catch_up`):
the docs the project's change log (memory.changelog) names since are looked up in the store,
the ticket store's rows joined again only for the docs whose rows changed, and each changed row
moved within the kept sorted listings; only a log started over (a bulk import, a rebuild)
lists the whole store again.

Usage counts (`recalled`, `used`: TicketQueries.memory_usage, per short id at recall time)
follow a doc through its edits: the counts of the ids it had are added to the id it has now.
"""

from __future__ import annotations

import base64
import json
import threading
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from orchestrator.memory.changelog import store_mark
from orchestrator.memory.curation import (
    SOURCE_KINDS,
    CurationError,
    origin_line,
    replacement,
    short,
    unused_note,
)
from orchestrator.memory.format import DOC_ID_CHARS, doc_id, shortest_unique
from orchestrator.memory.rebuild import read_epoch
from orchestrator.memory.timeline import expiry_note, is_expired, now_iso

if TYPE_CHECKING:
    from orchestrator.memory.changelog import Head
    from orchestrator.memory.facade import MemoryFacade
    from tickets.curation import MemoryChange, MemoryState
    from tickets.store import TicketStore

SORTS = ("newest", "oldest", "recalled", "used")
DEFAULT_PAGE = 20  # docs per page: the board shows 20 at a time whatever the store holds
MAX_PAGE = 500


class DocQuery(BaseModel):
    """Which docs, in which order, which page (every field optional: all docs, newest first)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    source: str | None = Field(None, description=f"Where the docs came from: one of {', '.join(SOURCE_KINDS)}.")
    ticket: str | None = Field(None, description="Only docs indexed by this ticket (its id).")
    author: str | None = Field(None, description="Only docs added by someone whose name contains this "
                               "(case-insensitive; a ticket doc's author ran the ticket).")
    since: date | None = Field(None, description="Only docs dated on or after this day (YYYY-MM-DD).")
    until: date | None = Field(None, description="Only docs dated on or before this day (YYYY-MM-DD).")
    pinned: bool | None = Field(None, description="Only pinned docs (true) or only unpinned (false).")
    superseded: bool | None = Field(None, description="Only superseded docs (true: history) or only live ones.")
    expired: bool | None = Field(None, description="Only expired docs (true: past their valid_until) "
                                 "or only docs still valid (false).")
    never_used: bool = Field(False, description="Only docs the agent never said it used.")
    sort: Literal["newest", "oldest", "recalled", "used"] = "newest"
    limit: int = Field(DEFAULT_PAGE, ge=1, le=MAX_PAGE)
    cursor: str | None = Field(None, description="The `next_cursor` of the previous page.")

    @field_validator("source")
    @classmethod
    def _known_source(cls, value: str | None) -> str | None:
        if value is not None and value not in SOURCE_KINDS:
            raise ValueError(f"source {value!r} is not one of {', '.join(SOURCE_KINDS)}")
        return value

    @classmethod
    def parse(cls, **given: Any) -> DocQuery:
        """A query from loose values (query-string text): blanks dropped, then checked; one
        CurationError (a 400) naming the first bad field otherwise."""
        values: dict[str, Any] = {}
        for key, value in given.items():
            if value is None or (isinstance(value, str) and not value.strip()):
                continue
            values[key] = value.strip() if isinstance(value, str) else value
        try:
            for key in ("since", "until"):
                if isinstance(values.get(key), str):
                    values[key] = date.fromisoformat(values[key])
            for key in ("pinned", "superseded", "expired", "never_used"):
                if isinstance(values.get(key), str):
                    values[key] = _flag(key, values[key])
            if isinstance(values.get("limit"), str):
                values["limit"] = int(values["limit"])
            return cls(**values)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "query"
            raise CurationError(f"{where}: {first['msg']}") from None
        except ValueError as exc:
            raise CurationError(f"{exc} (dates are YYYY-MM-DD, limit a whole number from 1 to "
                                f"{MAX_PAGE})") from None

    def filters(self) -> dict[str, Any]:
        """The filters set, for links to the next page and the API's answer."""
        return {k: v for k, v in self.model_dump(exclude={"limit", "cursor", "sort"}).items()
                if v not in (None, False)}


def _flag(key: str, text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{key} must be true or false, not {text!r}")


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ is the slow part of 100,000 rows
class _Row:
    """What filtering and sorting need of one doc (computed for every doc: kept small)."""

    text: str
    key: str  # the full doc id
    pos: int  # its place in the store's listing (oldest first): the order of docs dated alike
    when: float  # the doc's date (seconds since the epoch; 0 when unknown)
    stamp: float | None  # the date the store keeps (None: none; `when` then comes from records)
    source: str
    tickets: tuple[str, ...]
    author: str
    pinned: bool
    superseded: bool
    recalled: int
    used: int
    until: str | None  # valid_until (ISO UTC): expired once it has passed


def usage_by_doc(by_memory: Mapping[str, Mapping[str, int]],
                 changes: list[MemoryChange]) -> dict[str, dict[str, int]]:
    """Usage per short id with each doc's counts carried through its edits: an edit's old id's
    counts go to its new id (an undone edit's back again), so an edit does not reset them."""
    alias: dict[str, str] = {}  # a short id a doc had -> the one it has now
    for change in sorted(changes, key=lambda c: c["id"]):
        before, after = change["before"] or {}, change["after"] or {}
        if change["action"] == "edit":
            old, new = short(change["doc_id"]), short(str(after.get("doc_id") or doc_id(after.get("doc", ""))))
        elif change["action"] == "undo" and "doc" in (before or {}) and "doc" in (after or {}):
            old, new = short(doc_id(str(before["doc"]))), short(doc_id(str(after["doc"])))  # an edit undone
        else:
            continue
        if old == new:
            continue
        for was, now in list(alias.items()):
            if now == old:
                alias[was] = new
        alias[old] = new
        alias.pop(new, None)  # the new id is current now, even if the doc had it before
    merged: dict[str, dict[str, int]] = {}
    for ident, uses in by_memory.items():
        ident = short(ident)  # the block shows a longer id where two docs share the first 8
        into = merged.setdefault(alias.get(ident, ident), {"recalled": 0, "used": 0})
        into["recalled"] += int(uses.get("recalled", 0))
        into["used"] += int(uses.get("used", 0))
    return merged


def project_usage(store: TicketStore, project_id: str) -> dict[str, dict[str, int]]:
    """The project's usage per short id, following docs through their edits."""
    return usage_by_doc(store.memory_usage(project_id)["by_memory"],
                        store.memory_changes(project_id, limit=1_000_000))


def build_catalog(mem: MemoryFacade, store: TicketStore, project_id: str) -> Catalog:
    """The project's catalog from its store (none created: empty without one) and its records
    in the ticket store. It remembers where the project's change log stood when the store was
    listed (under the same locks, so no write falls between), to catch up from there."""
    records: list[tuple[str, float | None]] = []
    head, epoch, mark = None, None, None
    if mem.has_store(project_id):
        # "catalog", not a read: the project's lock is taken even for a store in the database,
        # so no write's note and doc fall on either side of this listing
        with mem.other_backend(project_id, mem.backend_name, "catalog") as backend:
            head, epoch = mem.change_log(project_id).head(), read_epoch(mem.store_dir(project_id))
            mark = store_mark(backend)
            records = list(backend.list_records())
    fingerprint = store.memory_fingerprint(project_id)
    catalog = Catalog(records, store.memory_state(project_id), store.doc_sources(project_id),
                      project_usage(store, project_id), store.ticket_runners(project_id))
    catalog.backend, catalog.head, catalog.epoch, catalog.fingerprint = mem.backend_name, head, epoch, fingerprint
    catalog.mark = mark
    return catalog


def catch_up(catalog: Catalog, mem: MemoryFacade, store: TicketStore, project_id: str) -> bool:
    """Bring a kept catalog up to date with every write since it was built or last caught up,
    in any process: the docs the change log names are looked up in the store (there or not),
    and the ticket store's rows are joined again only when they changed, each changed doc's
    row put in place in the kept listings. False when it cannot (a store rebuilt or a log
    started over since, the log unreadable, another backend): list the store again
    (build_catalog)."""
    if catalog.head is None or catalog.backend != mem.backend_name or not mem.has_store(project_id):
        return False
    with mem.other_backend(project_id, mem.backend_name, "catalog") as backend:  # see build_catalog
        if read_epoch(mem.store_dir(project_id)) != catalog.epoch:
            return False
        changes = mem.change_log(project_id)
        caught = changes.since(catalog.head)
        if caught is None:
            return False
        head, entries = caught
        # The store's docs as this catalog last saw them (no write noted since), or as the
        # last write through the facade left them (each such write checked, before it, that
        # the store was as the one before it had left it, else started the log over): any
        # other fingerprint means something else (a plugin's own tool, another program)
        # added or deleted docs, so list the store again.
        mark = store_mark(backend)
        if mark != (changes.mark() if entries else catalog.mark):
            return False
        latest: dict[str, float | None] = {}
        for entry in entries:  # the last time a doc was touched wins
            latest.pop(entry.doc, None)
            latest[entry.doc] = entry.at
        present = {text: bool(backend.has_doc(text)) for text in latest}
    fingerprint = store.memory_fingerprint(project_id)
    if fingerprint != catalog.fingerprint:
        changed = _changed_parts(catalog.fingerprint, fingerprint)
        catalog.rejoin(store.memory_state(project_id) if "states" in changed else catalog.states,
                       store.doc_sources(project_id) if "sources" in changed else catalog.sources,
                       project_usage(store, project_id) if "usage" in changed else catalog.usage,
                       store.ticket_runners(project_id) if "runners" in changed else catalog.runners)
        catalog.fingerprint = fingerprint
    catalog.apply_docs([(text, present[text], when) for text, when in latest.items()])
    catalog.head, catalog.mark = head, mark
    return True


def _changed_parts(before: tuple[Any, ...] | None, now: tuple[Any, ...]) -> set[str]:
    """Which of the ticket store's parts to read again, from what changed in its fingerprint
    (TicketStore.memory_fingerprint: the newest change, the ticket docs' count, newest and
    deleted, the states' count and newest, the newest run event). A running ticket moves only
    the run events: its usage and runners are read again, not the 10,000 states of a big store."""
    everything = {"states", "sources", "usage", "runners"}
    if before is None or len(before) != 7 or len(now) != 7:
        return everything
    differs = [a != b for a, b in zip(before, now)]
    change, docs, states, events = differs[0], any(differs[1:4]), any(differs[4:6]), differs[6]
    parts = set()
    if change or states:
        parts.add("states")
    if change or docs:  # an edit moves a ticket's doc to its new text
        parts.add("sources")
    if change or events:  # usage follows docs through their edits (the changes)
        parts.add("usage")
    if events:
        parts.add("runners")
    return parts


def stats(catalog: Catalog) -> dict[str, Any]:
    """`middle memory stats`: docs by source, pinned and superseded, how many the agent was
    shown (recalled) and said it used, and the candidates to supersede or forget."""
    recalled = [r for r in catalog.rows if r.recalled]
    candidates = [catalog.describe(r.text) for r in sorted(recalled, key=lambda r: (-r.recalled, r.key))
                  if not r.superseded and unused_note({"recalled": r.recalled, "used": r.used})]
    return {"docs": len(catalog.rows), "by_source": {k: v for k, v in catalog.counts().items() if k != "all"},
            "pinned": sum(r.pinned for r in catalog.rows),
            "superseded": sum(r.superseded for r in catalog.rows),
            "recalled_docs": len(recalled), "recalls": sum(r.recalled for r in recalled),
            "used_docs": sum(1 for r in recalled if r.used), "uses": sum(r.used for r in recalled),
            "candidates": [{"id": c["id"], "text": c["text"], "uses": c["uses"]} for c in candidates]}


def _epoch(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:  # stored state is untrusted: an unreadable date sorts as unknown
        return 0.0
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def _day_start(day: date) -> float:
    return datetime.combine(day, time.min, timezone.utc).timestamp()


class Catalog:
    """One project's docs, joined once with their states, ticket records and usage; kept up to
    date a few docs at a time (catch_up)."""

    def __init__(self, records: list[tuple[str, float | None]], states: Mapping[str, MemoryState],
                 sources: Mapping[str, list[Any]], usage: Mapping[str, Mapping[str, int]],
                 runners: Mapping[str, str] | None = None):
        self.backend: str | None = None  # set by build_catalog: what catch_up checks
        self.head: Head | None = None
        self.epoch: str | None = None
        self.fingerprint: tuple[Any, ...] | None = None
        self.mark: str | None = None  # the backend's fingerprint when last caught up (see catch_up)
        # a server's requests read a kept catalog while another request catches it up
        self.lock = threading.RLock()
        self._join(states, sources, usage, runners or {})
        self._rows: dict[str, _Row] = {}
        for pos, (text, when) in enumerate(records):
            self._rows[doc_id(text)] = self._row(text, pos, when)
        self._next_pos = len(records)
        # (filters, sort) -> (the query, the selected rows' sort keys, the rows), in order: the
        # next page of the same listing is a binary search, not another pass over every doc
        self._listings: dict[str, tuple[DocQuery, list[tuple[float, float, str]], list[_Row]]] = {}
        self._counts: dict[str, int] | None = None
        self._shared: dict[str, list[str]] | None = None  # see ident

    def _join(self, states: Mapping[str, MemoryState], sources: Mapping[str, list[Any]],
              usage: Mapping[str, Mapping[str, int]], runners: Mapping[str, str]) -> None:
        self.states, self.sources, self.usage, self.runners = states, sources, usage, runners
        self._superseding: dict[str, list[str]] = {}
        for each in states.values():
            if each["superseded_by"]:
                self._superseding.setdefault(each["superseded_by"], []).append(each["doc_id"])

    @property
    def rows(self) -> list[_Row]:
        """Every doc's row, in the store's order."""
        with self.lock:
            return list(self._rows.values())

    def _row(self, text: str, pos: int, stamp: float | None, key: str | None = None) -> _Row:
        key = key or doc_id(text)
        state = self.states.get(key)
        tickets = self.sources.get(text) or []
        if state is None and not tickets:  # most docs of a big store: nothing to join
            uses = self.usage.get(key[:DOC_ID_CHARS])
            return _Row(text, key, pos, float(stamp or 0.0), stamp, "unknown", (), "", False, False,
                        int(uses["recalled"]) if uses else 0, int(uses["used"]) if uses else 0, None)
        origin = state["origin"] if state is not None else None
        kind = "ticket" if tickets else str((origin or {}).get("kind") or "unknown")
        author = self._author(state, tickets)
        when = stamp
        if when is None:
            when = _epoch((state["added_at"] if state is not None else None)
                          or (tickets[0]["indexed_at"] if tickets else None))
        uses = self.usage.get(short(key)) or {}
        until = state.get("valid_until") if state is not None else None
        return _Row(text, key, pos, float(when or 0.0), stamp, kind if kind in SOURCE_KINDS else "unknown",
                    tuple(t["ticket_id"] for t in tickets), author or "",
                    bool(state and state["pinned"]), bool(state and state["superseded_by"]),
                    int(uses.get("recalled", 0)), int(uses.get("used", 0)), until or None)

    def apply_docs(self, docs: list[tuple[str, bool, float | None]]) -> None:
        """Docs written since: (text, whether the store holds it now, its time as written)."""
        with self.lock:
            self._apply_docs(docs)

    def _apply_docs(self, docs: list[tuple[str, bool, float | None]]) -> None:
        moved: list[tuple[_Row | None, _Row | None]] = []
        for text, present, stamp in docs:
            key = doc_id(text)
            old = self._rows.get(key)
            if present and old is None:
                new = self._rows[key] = self._row(text, self._next_pos, stamp, key)
                self._next_pos += 1
                moved.append((None, new))
            elif not present and old is not None:
                del self._rows[key]
                moved.append((old, None))
        if moved:
            self._shared = None
        self._moved(moved)

    def rejoin(self, states: Mapping[str, MemoryState], sources: Mapping[str, list[Any]],
               usage: Mapping[str, Mapping[str, int]], runners: Mapping[str, str]) -> None:
        """The ticket store's rows read again: only the docs whose join changed get new rows."""
        with self.lock:
            self._rejoin(states, sources, usage, runners)

    def _rejoin(self, states: Mapping[str, MemoryState], sources: Mapping[str, list[Any]],
                usage: Mapping[str, Mapping[str, int]], runners: Mapping[str, str]) -> None:
        old_states, old_sources, old_usage, old_runners = self.states, self.sources, self.usage, self.runners
        keys = {k for k in old_states.keys() | states.keys() if old_states.get(k) != states.get(k)}
        texts = {t for t in old_sources.keys() | sources.keys() if old_sources.get(t) != sources.get(t)}
        tickets = {t for t in old_runners.keys() | runners.keys() if old_runners.get(t) != runners.get(t)}
        if tickets:
            texts |= {t for t, records in sources.items() if any(r["ticket_id"] in tickets for r in records)}
        shorts = {k for k in old_usage.keys() | usage.keys() if old_usage.get(k) != usage.get(k)}
        self._join(states, sources, usage, runners)
        keys |= {doc_id(t) for t in texts}
        if shorts:
            keys |= {k for k in self._rows if k[:DOC_ID_CHARS] in shorts}
        moved: list[tuple[_Row | None, _Row | None]] = []
        for key in keys:
            old = self._rows.get(key)
            if old is not None:
                new = self._rows[key] = self._row(old.text, old.pos, old.stamp, key)
                moved.append((old, new))
        self._moved(moved)

    def _moved(self, moved: list[tuple[_Row | None, _Row | None]]) -> None:
        """Each kept listing with the changed rows taken out and put back in order (a few at a
        time; many at once: the listings are made again when asked)."""
        if not moved:
            return
        self._counts = None
        if len(moved) > 2_000:
            self._listings.clear()
            return
        for query, keys, rows in self._listings.values():
            for old, new in moved:
                if old is not None and _selected(old, query):
                    at = bisect_left(keys, _sort_key(old, query.sort))
                    if at < len(rows) and rows[at] is old:
                        del keys[at], rows[at]
                if new is not None and _selected(new, query):
                    key = _sort_key(new, query.sort)
                    at = bisect_left(keys, key)
                    keys.insert(at, key)
                    rows.insert(at, new)

    def _author(self, state: MemoryState | None, tickets: list[Any]) -> str:
        """Who added a doc: whoever added or imported it (its state's origin), else who ran the
        ticket that indexed it (a state row a pin made for a ticket doc names the pinner, not
        the author)."""
        if state is not None and state["origin"] and state["added_by"]:
            return state["added_by"]
        if tickets:
            return next((self.runners[t["ticket_id"]] for t in tickets if t["ticket_id"] in self.runners), "")
        return (state["added_by"] if state is not None else None) or ""

    def counts(self) -> dict[str, int]:
        """Docs per source kind, and all (counted once per change)."""
        with self.lock:
            return self._counted()

    def _counted(self) -> dict[str, int]:
        if self._counts is None:
            counts = {"all": len(self._rows), **{kind: 0 for kind in SOURCE_KINDS}}
            for row in self._rows.values():
                counts[row.source] += 1
            self._counts = counts
        return self._counts

    def has(self, text: str) -> bool:
        """Whether the store held exactly this doc when the catalog was last brought up to date."""
        return doc_id(text) in self._rows

    def page(self, query: DocQuery) -> dict[str, Any]:
        """One page of the docs `query` selects: `docs` (described), `matched` (how many the
        filters select in all), `next_cursor` (None on the last page)."""
        after = _read_cursor(query.cursor, query.sort) if query.cursor else None
        with self.lock:
            keys, rows = self._listing(query)
            start = bisect_right(keys, after) if after is not None else 0
            end = min(start + query.limit, len(rows))
            shown, matched = rows[start:end], len(rows)
            next_cursor = _cursor(keys[end - 1], query.sort) if end < len(rows) else None
        return {"matched": matched, "docs": [self.describe(r.text) for r in shown], "next_cursor": next_cursor}

    def _listing(self, query: DocQuery) -> tuple[list[tuple[float, float, str]], list[_Row]]:
        at = now_iso()
        # a listing that selects by expiry is made again each minute: docs expire as time passes
        name = json.dumps([query.filters(), query.sort, at[:16] if query.expired is not None else ""],
                          default=str, sort_keys=True)
        if name not in self._listings:
            keyed = sorted(((_sort_key(r, query.sort), r) for r in self._rows.values() if _selected(r, query, at)),
                           key=lambda kr: kr[0])
            if len(self._listings) >= 16:  # a few listings at once (people filtering differently)
                self._listings.pop(next(iter(self._listings)))
            self._listings[name] = (query, [k for k, _ in keyed], [r for _, r in keyed])
        _, keys, rows = self._listings[name]
        return keys, rows

    def ident(self, key: str) -> str:
        """The id a person is shown for the doc (or any id) `key`: the shortest prefix, of
        DOC_ID_CHARS at least, no other doc's id in the catalog starts with (as the block shows
        it), so an id copied from the board or the API names one doc."""
        with self.lock:
            # the ids that share their first DOC_ID_CHARS, by those: grouped again after the docs
            # change (0.12 s at 100,000 docs under load 5; 3 groups there), not per doc shown
            if self._shared is None:
                by_short: dict[str, list[str]] = {}
                for each in self._rows:
                    by_short.setdefault(each[:DOC_ID_CHARS], []).append(each)
                self._shared = {s: keys for s, keys in by_short.items() if len(keys) > 1}
            return shortest_unique(key, self._shared.get(key[:DOC_ID_CHARS], ()))

    def describe(self, text: str) -> dict[str, Any]:
        """One doc as the board and the API show it (its actions need `id`)."""
        key = doc_id(text)
        state = self.states.get(key)
        tickets = [{**t, "by": self.runners.get(t["ticket_id"])} for t in self.sources.get(text) or []]
        origin = state["origin"] if state is not None else None
        kind = "ticket" if tickets else str((origin or {}).get("kind") or "unknown")
        of = str((origin or {}).get("of") or "")
        shown = {"tickets": tickets, "origin": origin, "added_by": state and state["added_by"],
                 "added_at": state and state["added_at"], "short_ids": {of: self.ident(of)} if of else {}}
        new = replacement(self.states, key)
        uses = self.usage.get(short(key))
        # the end of its supersede chain; the link itself when that doc has no state row
        superseded_by = self.ident(new["doc_id"]) if new is not None else (
            self.ident(state["superseded_by"]) if state is not None and state["superseded_by"] else None)
        until = (state.get("valid_until") if state is not None else None) or None
        # `key`, the whole id, is what the board's actions name: at 100,000 docs a few pairs
        # of docs share their first 8 characters, and such an `id` is refused as ambiguous
        return {"id": self.ident(key), "key": key, "text": text, "tickets": tickets,
                "source": kind if kind in SOURCE_KINDS else "unknown",
                "origin": origin_line(shown), "author": self._author(state, tickets) or None,
                "pinned": bool(state and state["pinned"]), "superseded_by": superseded_by,
                "supersedes": [self.ident(k) for k in self._superseding.get(key, [])], "uses": uses,
                "valid_until": until, "valid_through": _last_day(until),
                "expired": bool(until and is_expired(state)),
                "validity": expiry_note(state),
                # an already superseded doc is history: never a candidate to supersede again
                "candidate": None if superseded_by else unused_note(uses)}


def _last_day(until: str | None) -> str | None:
    """The last day a doc is valid (YYYY-MM-DD), from its valid_until (the instant it expires:
    a day given as `--valid-until DAY` expires at the next day's start)."""
    if not until:
        return None
    try:
        moment = datetime.fromisoformat(until)
    except ValueError:  # stored state is untrusted: no day rather than a crash
        return None
    return (moment - timedelta(microseconds=1)).date().isoformat()


def _selected(row: _Row, q: DocQuery, at: str | None = None) -> bool:
    if q.source is not None and row.source != q.source:
        return False
    if q.ticket is not None and q.ticket not in row.tickets:
        return False
    if q.author is not None and q.author.lower() not in row.author.lower():
        return False
    if q.since is not None and row.when < _day_start(q.since):
        return False
    if q.until is not None and row.when >= _day_start(q.until) + 86400:
        return False
    if q.pinned is not None and row.pinned != q.pinned:
        return False
    if q.superseded is not None and row.superseded != q.superseded:
        return False
    if q.expired is not None and (row.until is not None and row.until <= (at or now_iso())) != q.expired:
        return False
    return not (q.never_used and row.used)


def _sort_key(row: _Row, sort: str) -> tuple[float, float, str]:
    """Ascending tuples; the id last makes every key unique, so a cursor names one place."""
    if sort == "oldest":
        return (row.when, float(row.pos), row.key)
    if sort == "recalled":
        return (-float(row.recalled), -row.when - row.pos * 1e-9, row.key)
    if sort == "used":
        return (-float(row.used), -row.when - row.pos * 1e-9, row.key)
    return (-row.when, -float(row.pos), row.key)


def _cursor(key: tuple[float, float, str], sort: str) -> str:
    raw = json.dumps({"s": sort, "k": list(key)}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _read_cursor(cursor: str, sort: str) -> tuple[float, float, str]:
    """The key a cursor carries; a cursor is client input: anything else is one clear error."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        first, second, ident = data["k"]
        key = (float(first), float(second), str(ident))
        made_for = data["s"]
    except Exception:
        raise CurationError("cursor is not one this server gave: pass the `next_cursor` of the "
                            "previous page, or none for the first page") from None
    if made_for != sort:
        raise CurationError(f"cursor was made for sort {made_for!r}, not {sort!r}: start again "
                            "from the first page when you change the order")
    return key
