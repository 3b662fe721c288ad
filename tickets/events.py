"""Run events: what happened during a run, in order, stored with the run in the ticket store.

The CLI (`middle log --follow`), the HTTP API and the dashboard all read this one record, so a
viewer opened mid-run replays what it missed (events after a given id) and then follows.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from tickets.db import and_equal
from tickets.model import utc_now

EVENTS_SCHEMA = """;
CREATE TABLE IF NOT EXISTS run_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    ticket_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL DEFAULT '{}',
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS run_events_by_run ON run_events(run_id, id)
"""

# What kinds of event the runner records (the data keys each carries are in the README).
EVENT_KINDS = ("run_start", "node", "note", "coding_agent", "decision", "run_end", "feedback", "recall", "check",
               "setup")
MAX_EVENT_TEXT = 4000  # one event's text fields are cut here; the turn record keeps the whole text


def insert_event(db: Any, conn: Any, run_id: str, ticket_id: str, kind: str, data: str, at: str) -> int:
    """The one writer of run_events: append an event inside the caller's write transaction and
    tell followers; its id. Readers tail a run's or a ticket's log by id (`after`, a run's
    `feedback_seen`), which is right only if those ids become visible in order: on PostgreSQL a
    sequence hands out ids at insert, so a transaction that drew id 10 and commits after
    another's 11 would be skipped by a reader that had seen 11. `db.order_events` makes each
    insert wait for the ticket's previous one to commit (a lock per ticket, so the runs of a
    fleet write side by side; SQLite's writers take turns already). A reader of every ticket at
    once (`list_events` with neither run nor ticket) gets no such promise: nothing tails that."""
    db.order_events(conn, ticket_id)
    row = conn.execute("INSERT INTO run_events (run_id, ticket_id, kind, data, at) VALUES (?, ?, ?, ?, ?)"
                       " RETURNING id", (run_id, ticket_id, kind, data, at)).fetchone()
    db.notify(conn, int(row[0]))  # followers on other machines see it at once
    return int(row[0])


def clip_event_data(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_EVENT_TEXT:
        return value[:MAX_EVENT_TEXT] + f"… [{len(value) - MAX_EVENT_TEXT} more chars]"
    if isinstance(value, dict):
        return {k: clip_event_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clip_event_data(v) for v in value]
    return value


class RunEvents:
    """Event methods of TicketStore (needs its `_write` and `_read`)."""

    if TYPE_CHECKING:  # provided by TicketStore, which this mixin is part of
        _db: Any

        def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]: ...
        def _write(self) -> AbstractContextManager[Any]: ...

    def add_event(self, run_id: str, ticket_id: str, kind: str, data: dict[str, Any] | None = None, *,
                  at: str | None = None, token: int | None = None) -> int:
        """Append one event to a run; returns its id (ids grow, so `after` can resume a stream).
        `at`: when it happened, if earlier than now (an event that waited for the store).
        `token`: the run owner's claim token (refused with ClaimLost once another holds the run)."""
        from tickets.claims import _fence

        payload = json.dumps(clip_event_data(data or {}), ensure_ascii=False, default=str)
        with self._write() as conn:
            _fence(self._db, conn, run_id, token)
            return insert_event(self._db, conn, run_id, ticket_id, kind, payload, at or utc_now())

    def list_events(self, *, run_id: str | None = None, ticket_id: str | None = None,
                    after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """Events of a run (or of all a ticket's runs) with id > after, oldest first."""
        params: list[Any] = [after]
        sql = and_equal("SELECT * FROM run_events WHERE id > ?", params, {"run_id": run_id, "ticket_id": ticket_id})
        rows = self._read(sql + " ORDER BY id LIMIT ?", (*params, limit))
        return [{**dict(r), "data": json.loads(r["data"])} for r in rows]
