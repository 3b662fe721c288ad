"""What people did to the project memory: pins, supersede links, where a doc came from, and the
record of every change (who, when, before and after), in the ticket store.

Kept here, not in a memory backend's store, because every process and machine of a project
reads this store (SQLite, or one PostgreSQL database), it outlives `middle memory reindex` (which
rebuilds the backends' stores) and it is plain rows anyone can read with `sqlite3` or `psql`. A
doc is named by its id: the SHA-256 of its text (hex), the same in every backend and after a
reindex (`middle memory list` shows its first 8 characters).

- `memory_state`: one row per doc that has curation or a known origin other than a ticket:
  `pinned` (always shown to the agent), `superseded_by` (the id of the doc that replaces it; the
  old one is kept and ranked below it), `origin` (JSON: `{"kind": "hand" | "commit" | "file" |
  "transcript" | "edit" | "supersede" | ..., ...}`), who added it and when, and `valid_until`
  (an ISO time after which the doc is expired: out of recall, shown as expired). A ticket's
  completion doc is found in `memory_docs` (its ticket and run) instead.
- `memory_changes`: every change, in order: `action` (add, edit, supersede, pin, unpin, forget,
  expire: a new valid_until, bulk: a forget or supersede of many docs at once, undone as one,
  undo), the doc's id, `before_state` and `after_state` (JSON: what the change needs to be
  undone, e.g. the text before and after an edit), `who`, `at`, and the undo links (`undoes`,
  `undone_by`).
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Iterable, NotRequired, TypedDict

from tickets.model import utc_now

CURATION_SCHEMA = """;
CREATE TABLE IF NOT EXISTS memory_state (
    project_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    doc TEXT NOT NULL,
    pinned INTEGER NOT NULL DEFAULT 0,
    superseded_by TEXT,
    origin TEXT,
    added_by TEXT,
    added_at TEXT,
    valid_until TEXT,
    PRIMARY KEY (project_id, doc_id)
);
CREATE TABLE IF NOT EXISTS memory_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id TEXT NOT NULL,
    action TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    before_state TEXT,
    after_state TEXT,
    who TEXT NOT NULL,
    at TEXT NOT NULL,
    undoes INTEGER,
    undone_by INTEGER
);
CREATE INDEX IF NOT EXISTS memory_changes_by_project ON memory_changes(project_id, id);
CREATE INDEX IF NOT EXISTS memory_state_by_replacement ON memory_state(project_id, superseded_by)
"""

CHANGE_ACTIONS = ("add", "edit", "supersede", "pin", "unpin", "forget", "expire", "bulk", "undo")
CURATION_SINCE = 7  # the ticket store's schema version that made these tables
VALID_UNTIL_SINCE = 14  # ... and memory_state.valid_until
_IN_CHUNK = 500  # ids per IN list: well under SQLite's and PostgreSQL's parameter limits


class MemoryState(TypedDict):
    doc_id: str
    doc: str
    pinned: bool
    superseded_by: str | None
    origin: dict[str, Any] | None
    added_by: str | None
    added_at: str | None
    valid_until: NotRequired[str | None]  # absent in rows built before it existed: None


class MemoryChange(TypedDict):
    id: int
    project_id: str
    action: str
    doc_id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    who: str
    at: str
    undoes: int | None
    undone_by: int | None


def _state(row: Any) -> MemoryState:
    return {"doc_id": row["doc_id"], "doc": row["doc"], "pinned": bool(row["pinned"]),
            "superseded_by": row["superseded_by"],
            "origin": json.loads(row["origin"]) if row["origin"] else None,
            "added_by": row["added_by"], "added_at": row["added_at"],
            # a store opened read-only before a command migrated it has no such column
            "valid_until": row["valid_until"] if "valid_until" in row.keys() else None}


def _change(row: Any) -> MemoryChange:
    return {"id": int(row["id"]), "project_id": row["project_id"], "action": row["action"],
            "doc_id": row["doc_id"],
            "before": json.loads(row["before_state"]) if row["before_state"] else None,
            "after": json.loads(row["after_state"]) if row["after_state"] else None,
            "who": row["who"], "at": row["at"], "undoes": row["undoes"],
            "undone_by": row["undone_by"]}


def _put(conn: Any, project_id: str, state: MemoryState) -> None:
    conn.execute(
        "INSERT INTO memory_state (project_id, doc_id, doc, pinned, superseded_by, origin, added_by,"
        " added_at, valid_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project_id, doc_id)"
        " DO UPDATE SET doc = excluded.doc, pinned = excluded.pinned,"
        " superseded_by = excluded.superseded_by, origin = excluded.origin,"
        " added_by = excluded.added_by, added_at = excluded.added_at,"
        " valid_until = excluded.valid_until",
        (project_id, state["doc_id"], state["doc"], int(state["pinned"]), state["superseded_by"],
         json.dumps(state["origin"]) if state["origin"] else None, state["added_by"],
         state["added_at"], state.get("valid_until")))


class MemoryCuration:
    """Curation methods of TicketStore (needs its `_write` and `_read`)."""

    if TYPE_CHECKING:  # provided by TicketStore, which this mixin is part of
        version: int

        def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]: ...
        def _write(self) -> AbstractContextManager[Any]: ...

    def memory_state(self, project_id: str) -> dict[str, MemoryState]:
        """Every doc of the project with curation or a known origin, by doc id (one query: the
        memory facade reads it on every recall, so another process's pin counts at once). A
        store opened read-only before any command migrated it has none."""
        if self.version < CURATION_SINCE:
            return {}
        return {row["doc_id"]: _state(row) for row in self._read(
            "SELECT * FROM memory_state WHERE project_id = ?", (project_id,))}

    def memory_marks(self, project_id: str) -> dict[str, MemoryState]:
        """The states a recall needs, by doc id: the docs people pinned, superseded or gave a
        valid_until, and the replacements those supersede links name (their text and date).
        Read on every recall (three times a ticket turn), so it leaves out the rows that only
        say where a doc came from: an import gives one to every doc, and at 100,000 docs the
        10,000 such rows took 0.4 to 1 s a read, where the marks are a few hundred."""
        if self.version < CURATION_SINCE:
            return {}
        # a store opened read-only before a command migrated it has no valid_until yet
        expiring = " OR valid_until IS NOT NULL" if self.version >= VALID_UNTIL_SINCE else ""
        return {row["doc_id"]: _state(row) for row in self._read(
            f"SELECT * FROM memory_state WHERE project_id = ? AND (pinned <> 0 OR superseded_by IS NOT NULL"
            f"{expiring} OR doc_id IN (SELECT superseded_by FROM memory_state"
            " WHERE project_id = ? AND superseded_by IS NOT NULL))", (project_id, project_id))}

    def memory_state_for(self, project_id: str, doc_ids: Iterable[str]) -> dict[str, MemoryState]:
        """The states of the docs `doc_ids` names and of the docs one of them supersedes, by doc
        id: what a verb on a few docs needs (`middle memory show|pin|edit|undo ID`), read by
        key (the primary key, and the index of `superseded_by`), where `memory_state` reads
        every row of the project (10,000 rows took most of a show at 100,000 docs)."""
        if self.version < CURATION_SINCE:
            return {}
        ids = list(dict.fromkeys(doc_ids))
        found: dict[str, MemoryState] = {}
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = tuple(ids[start:start + _IN_CHUNK])
            marks = ", ".join("?" * len(chunk))
            for column in ("doc_id", "superseded_by"):
                for row in self._read(f"SELECT * FROM memory_state WHERE project_id = ? AND {column}"
                                      f" IN ({marks})", (project_id, *chunk)):
                    found[row["doc_id"]] = _state(row)
        return found

    def note_memory_origins(self, project_id: str, docs: Iterable[tuple[str, str, dict[str, Any]]],
                            who: str) -> None:
        """Where docs came from ((doc id, text, origin) each), for those with no record yet:
        an import run again, or a doc a ticket indexed too, keeps its first origin."""
        now = utc_now()
        with self._write() as conn:
            for doc_id, doc, origin in docs:
                conn.execute(
                    "INSERT INTO memory_state (project_id, doc_id, doc, origin, added_by, added_at)"
                    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (project_id, doc_id) DO NOTHING",
                    (project_id, doc_id, doc, json.dumps(origin), who, now))

    def record_memory_change(self, project_id: str, action: str, doc_id: str, *, who: str,
                             before: dict[str, Any] | None = None,
                             after: dict[str, Any] | None = None,
                             put: Iterable[MemoryState] = (), drop: Iterable[str] = (),
                             undoes: int | None = None) -> int:
        """One change, in one transaction: the states it writes (`put`) or removes (`drop`, by
        doc id), and its entry in the record (`undoes`: the change it takes back, marked so);
        returns the entry's id."""
        if action not in CHANGE_ACTIONS:
            raise ValueError(f"unknown memory change {action!r}: one of {', '.join(CHANGE_ACTIONS)}")
        with self._write() as conn:
            for state in put:
                _put(conn, project_id, state)
            for gone in drop:
                conn.execute("DELETE FROM memory_state WHERE project_id = ? AND doc_id = ?",
                             (project_id, gone))
            row = conn.execute(
                "INSERT INTO memory_changes (project_id, action, doc_id, before_state, after_state,"
                " who, at, undoes) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (project_id, action, doc_id, json.dumps(before) if before is not None else None,
                 json.dumps(after) if after is not None else None, who, utc_now(), undoes)).fetchone()
            change = int(row[0])
            if undoes is not None:
                conn.execute("UPDATE memory_changes SET undone_by = ? WHERE id = ? AND project_id = ?",
                             (change, undoes, project_id))
            return change

    def memory_changes(self, project_id: str, *, doc_ids: Iterable[str] | None = None,
                       limit: int = 200, action: str | None = None) -> list[MemoryChange]:
        """The project's changes, newest first (only those of `doc_ids` when given: a doc's
        history follows it through its edits when the caller names every id it had; only
        those of one `action`, e.g. the edits a doc's ids are followed through, when given).
        Without `doc_ids` the database cuts the list at `limit`."""
        if self.version < CURATION_SINCE:
            return []
        where = "project_id = ?"
        params: list[Any] = [project_id]
        if action is not None:
            where += " AND action = ?"
            params.append(action)
        cut = ""
        if doc_ids is None:
            cut = " LIMIT ?"
            params.append(limit)
        rows = self._read(f"SELECT * FROM memory_changes WHERE {where} ORDER BY id DESC{cut}", tuple(params))
        wanted = None if doc_ids is None else set(doc_ids)
        changes = [_change(r) for r in rows]
        if wanted is not None:
            changes = [c for c in changes if c["doc_id"] in wanted or wanted & _named(c)]
        return changes[:limit]

    def memory_change(self, project_id: str, change_id: int) -> MemoryChange | None:
        rows = self._read("SELECT * FROM memory_changes WHERE project_id = ? AND id = ?",
                          (project_id, change_id))
        return _change(rows[0]) if rows else None

    def memory_fingerprint(self, project_id: str) -> tuple[Any, ...]:
        """A few numbers that change whenever what the board lists of the project's memory
        changes in this store (curation, ticket docs and their reverts, runs' recall and use):
        the board keeps its listing while they stay the same. Each is one indexed lookup."""
        if self.version < CURATION_SINCE:
            return ()
        changes = self._read("SELECT COALESCE(MAX(id), 0) FROM memory_changes WHERE project_id = ?",
                             (project_id,))[0][0]
        docs = tuple(self._read("SELECT COUNT(*), COALESCE(MAX(id), 0), COUNT(deleted_at) FROM memory_docs"
                                " WHERE project_id = ?", (project_id,))[0])
        states = tuple(self._read("SELECT COUNT(*), MAX(added_at) FROM memory_state WHERE project_id = ?",
                                  (project_id,))[0])
        events = self._read("SELECT COALESCE(MAX(id), 0) FROM run_events")[0][0]
        return (changes, *docs, *states, events)

    def ticket_runners(self, project_id: str) -> dict[str, str]:
        """Who ran each ticket of the project (the `by` of its latest run's `run_start` event):
        a ticket doc's author. Runs before it was recorded, or events unreadable, have none."""
        runners: dict[str, str] = {}
        for row in self._read(
                "SELECT e.ticket_id, e.data FROM run_events e JOIN tickets t ON t.id = e.ticket_id"
                " WHERE e.kind = 'run_start' AND t.project_id = ? ORDER BY e.id", (project_id,)):
            try:
                by = json.loads(row["data"]).get("by")
            except (ValueError, AttributeError):  # stored state is untrusted: no name, not a crash
                continue
            if isinstance(by, str) and by:
                runners[row["ticket_id"]] = by
        return runners

    def set_memory_docs_deleted(self, project_id: str, doc: str, deleted: bool) -> int:
        """A forgotten doc's ticket records marked deleted (so "Recent work" no longer shows it),
        or marked live again by its undo; returns how many records changed."""
        with self._write() as conn:
            if deleted:
                cur = conn.execute("UPDATE memory_docs SET deleted_at = ? WHERE project_id = ? AND"
                                   " doc = ? AND deleted_at IS NULL", (utc_now(), project_id, doc))
            else:
                cur = conn.execute("UPDATE memory_docs SET deleted_at = NULL WHERE project_id = ?"
                                   " AND doc = ? AND deleted_at IS NOT NULL", (project_id, doc))
            return cur.rowcount


def _named(change: MemoryChange) -> set[str]:
    """The other doc ids a change names (an edit's new id, a supersede's replacement)."""
    ids = set()
    for side in (change["before"] or {}, change["after"] or {}):
        for key in ("doc_id", "by"):
            if isinstance(side.get(key), str):
                ids.add(side[key])
        for item in side.get("docs") or []:  # a bulk change names each of its docs
            if isinstance(item, dict) and isinstance(item.get("doc_id"), str):
                ids.add(item["doc_id"])
    return ids
