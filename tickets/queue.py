"""The queue of runnable tickets: what a worker claims next, what it retries, and what wakes it.

A fleet's workers share one backlog. The store answers "the next ticket that may start" in one
transaction, over an index of pending tickets, with dependencies resolved in SQL from the
`ticket_deps` edges (kept by `upsert_ticket`): a ticket is runnable while it is pending, no live
claim holds it and every ticket it depends on has a status that lets it start (`tickets.deps`).
On PostgreSQL the pick is `FOR UPDATE SKIP LOCKED LIMIT 1`, so a hundred claimers each take a
different ticket without waiting on each other; on SQLite BEGIN IMMEDIATE makes them take turns.

Which tickets may start is the store's own state, not a query over the backlog: the claim reads
a partial index of the pending tickets whose `deps_met` lets them start (tickets/runnable.py, the
one writer of ticket statuses and dependency edges), so a blocked backlog is never scanned.

Idle workers are woken only when a ticket becomes runnable (`notify_runnable`, its own channel):
a ticket filed or put back to pending, a dependency that completed or merged. Run events never
wake them.

A run stopped by something passing (a Claude Code turn that crashed or timed out, the store out
of reach, a stopped worker) is retried a bounded number of times with growing waits: its end
(`end_run` with `retry`) counts the attempt in `tickets.retries` and sets `tickets.retry_at` by
the database's clock; any worker takes it when that time has come (`take_retry`). A failed check
or an agent's "failed" is never retried.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple

from tickets.deps import SATISFIED
from tickets.model import RunStatus, utc_now
from tickets.runnable import RUNNABLE, locked_write, set_deps

QUEUE_SCHEMA = """;
CREATE TABLE IF NOT EXISTS ticket_deps (
    ticket_id TEXT NOT NULL REFERENCES tickets(id) ON DELETE CASCADE,
    depends_on TEXT NOT NULL,
    PRIMARY KEY (ticket_id, depends_on)
);
CREATE INDEX IF NOT EXISTS ticket_deps_by_dependency ON ticket_deps(depends_on)
"""
# Indexes over columns a migration adds (tickets.retry_at, tickets.deps_met): created after `_add_columns`.
QUEUE_INDEXES = (
    "CREATE INDEX IF NOT EXISTS tickets_pending ON tickets(created_at, id) WHERE status = 'pending'",
    "CREATE INDEX IF NOT EXISTS tickets_runnable ON tickets(created_at, id)"
    " WHERE status = 'pending' AND deps_met = 2",
    "CREATE INDEX IF NOT EXISTS tickets_runnable_complete ON tickets(created_at, id)"
    " WHERE status = 'pending' AND deps_met >= 1",
    "CREATE INDEX IF NOT EXISTS tickets_running ON tickets(id) WHERE status = 'running'",
    "CREATE INDEX IF NOT EXISTS tickets_to_retry ON tickets(retry_at) WHERE retry_at IS NOT NULL",
)


# PostgreSQL's claim_next as one statement: what the SQLite transaction does step by step (and
# `_put_claim` writes), each step a data-modifying part of one WITH, so a claim is one round trip.
_CLAIM_NEXT_PG = """WITH pick AS ({pick}),
ticket AS (
    UPDATE tickets SET fence = fence + 1, status = 'running', status_reason = NULL, updated_at = ?,
    retries = 0, retry_at = NULL FROM pick WHERE tickets.id = pick.id RETURNING tickets.id, tickets.fence),
run AS (
    INSERT INTO runs (id, ticket_id, status, started_at) SELECT ?, id, 'running', {stamp} FROM ticket RETURNING id)
INSERT INTO claims (ticket_id, run_id, host, pid, claimed_at, lease_until, owner_start, token)
SELECT id, ?, ?, ?, ?, {lease}, ?, fence FROM ticket
ON CONFLICT (ticket_id) DO UPDATE SET run_id = excluded.run_id, host = excluded.host, pid = excluded.pid,
    claimed_at = excluded.claimed_at, lease_until = excluded.lease_until,
    owner_start = excluded.owner_start, token = excluded.token
RETURNING ticket_id, token"""


class NewRun(NamedTuple):
    """A run `claim_next` created and claimed: the ticket, the run and the claim's token."""

    ticket_id: str
    run_id: str
    token: int


class Unowned(NamedTuple):
    """A ticket left `running` whose claim may be dead (see `running_claims`)."""

    ticket_id: str
    run_id: str | None
    host: str | None
    pid: int | None
    owner_start: str | None
    expired: bool  # no claim, or its lease ran out by the database's clock


class Retry(NamedTuple):
    ticket_id: str
    attempt: int  # 1 for the first retry


def _marks(values: Iterable[str]) -> tuple[str, tuple[str, ...]]:
    values = tuple(values)
    return ",".join("?" * len(values)), values


class TicketQueue:
    """Queue methods of TicketStore (needs its `_write`, `_read`, `_db` and `_put_claim`)."""

    if TYPE_CHECKING:  # provided by TicketStore, which this mixin is part of
        _db: Any

        def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]: ...
        def _write(self) -> AbstractContextManager[Any]: ...
        def _put_claim(self, conn: Any, ticket_id: str, run_id: str, lease_s: float, pid: int | None) -> int: ...

    def _status_write(self) -> AbstractContextManager[Any]:
        """A write transaction that may change a ticket's status or dependencies (`put_status`,
        `set_deps`): on PostgreSQL it takes the dependencies' lock first (`lock_deps`)."""
        return locked_write(self._db, self._write())

    def claim_next(self, *, dependencies: str = "merged", lease_s: float = 120.0,
                   pid: int | None = None) -> NewRun | None:
        """Claim the next runnable ticket (oldest first) for a new run, atomically: the pick, the
        run, the claim (its fence raised) and the ticket's status. On PostgreSQL that is one
        statement (one round trip, its own transaction); on SQLite one BEGIN IMMEDIATE
        transaction. None: nothing can start now."""
        import os
        import uuid

        from tickets.claims import this_host
        from tickets.procs import process_token

        db = self._db
        # Pending to running changes no dependent's deps_met: this write needs no `status_write`.
        pick = pick_sql(db, dependencies)
        run_id, now, pid = uuid.uuid4().hex, utc_now(), pid or os.getpid()
        if db.dialect == "postgres":
            owner = (this_host(), pid, now, process_token(pid))
            rows = db.statement(_CLAIM_NEXT_PG.format(pick=pick, lease=db.lease_sql(lease_s), stamp=db.stamp_sql),
                                (now, run_id, run_id, *owner))
            return NewRun(rows[0][0], run_id, int(rows[0][1])) if rows else None
        with self._write() as conn:
            row = conn.execute(pick).fetchone()
            if row is None:
                return None
            ticket_id = row[0]
            conn.execute(f"INSERT INTO runs (id, ticket_id, status, started_at) VALUES (?, ?, ?, {db.stamp_sql})",
                         (run_id, ticket_id, RunStatus.RUNNING.value))
            token = self._put_claim(conn, ticket_id, run_id, lease_s, pid)
            conn.execute("UPDATE tickets SET status = 'running', status_reason = NULL, updated_at = ?,"
                         " retries = 0, retry_at = NULL WHERE id = ?", (now, ticket_id))
        return NewRun(ticket_id, run_id, token)

    def running_claims(self) -> list[Unowned]:
        """Every ticket left `running`, with its claim (one query; a fleet has few): the worker
        takes over those whose claim is gone, ran out, or (on this machine) lost its process."""
        rows = self._read(
            "SELECT t.id, c.run_id, c.host, c.pid, c.owner_start,"
            f" (c.lease_until IS NULL OR c.lease_until <= {self._db.now_sql}) AS expired"
            " FROM tickets t LEFT JOIN claims c ON c.ticket_id = t.id WHERE t.status = 'running' ORDER BY t.id")
        return [Unowned(r[0], r[1], r[2], r[3], r[4], bool(r[5])) for r in rows]

    def take_retry(self, lease_s: float = 120.0) -> Retry | None:
        """Take the ticket whose retry is due (by the database's clock) for `lease_s`, so no other
        worker takes it too; the caller resumes its run, whose claim takes it out of the queue.
        A worker killed in between leaves it due again once `lease_s` has passed (taken out of
        the queue at once, as it was, the retry was lost). None: no retry is due."""
        db = self._db
        with self._write() as conn:
            row = conn.execute(
                "SELECT id, retries FROM tickets WHERE retry_at IS NOT NULL"
                f" AND retry_at <= {db.now_sql} AND status IN ('interrupted', 'failed')"
                " AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.ticket_id = tickets.id"
                f" AND c.lease_until > {db.now_sql})"
                " ORDER BY retry_at LIMIT 1" + db.skip_locked).fetchone()
            if row is None:
                return None
            conn.execute(f"UPDATE tickets SET retry_at = {db.lease_sql(lease_s)} WHERE id = ?", (row[0],))
        return Retry(row[0], int(row[1]))

    def drop_retry(self, ticket_id: str, attempt: int) -> None:
        """A taken retry whose resume could not start (it raised before its claim, which clears
        the retry): out of the queue, for a person to resume, as a retry that is spent. Held for a
        lease instead, it would fail the same way every lease, and keep a `--once` worker waiting
        for it. Only while the ticket is as take_retry left it: a run that claimed it meanwhile
        (its failure counted a new retry, `retries` then above `attempt`) keeps its own."""
        with self._write() as conn:
            conn.execute("UPDATE tickets SET retry_at = NULL WHERE id = ? AND retries = ?"
                         " AND status IN ('interrupted', 'failed')", (ticket_id, attempt))

    def retry_of(self, ticket_id: str) -> tuple[int, str | None]:
        """(retries spent on its run's passing failures, when the next one is due or None)."""
        rows = self._read("SELECT retries, retry_at FROM tickets WHERE id = ?", (ticket_id,))
        return (int(rows[0][0]), rows[0][1]) if rows else (0, None)

    def has_waiting_work(self, dependencies: str = "merged") -> bool:
        """Whether a pending ticket may still become runnable: one that waits for a ticket that
        is pending or running (so a worker with `--once` waits rather than leaves), or a retry
        not due yet."""
        if self._read("SELECT 1 FROM tickets WHERE retry_at IS NOT NULL LIMIT 1"):
            return True
        marks, satisfied = _marks(sorted(SATISFIED[dependencies]))
        rows = self._read(
            "SELECT 1 FROM tickets t JOIN ticket_deps d ON d.ticket_id = t.id JOIN tickets u ON u.id = d.depends_on"
            f" WHERE t.status = 'pending' AND NOT ({RUNNABLE[dependencies]}) AND u.status NOT IN ({marks})"
            " AND u.status IN ('pending', 'running')"
            " LIMIT 1", satisfied)
        return bool(rows)

    def wait_for_runnable(self, timeout: float) -> bool:
        """Block until a ticket becomes runnable (PostgreSQL pushes it; True), or `timeout`
        passes (False; on SQLite always, a poll). Run events do not end the wait."""
        return bool(self._db.wait_runnable(timeout))

    def runnable_seen(self) -> int:
        """How many "runnable" notifications this process has had (PostgreSQL; 0 on SQLite): a
        busy worker compares it before asking the store again."""
        return int(self._db.runnable_seen())

    def size_pool(self, connections: int) -> None:
        """At most `connections` pooled connections in this process (PostgreSQL; SQLite has one)."""
        self._db.resize(connections)


def pick_sql(db: Any, dependencies: str) -> str:
    """The claim's pick: the oldest runnable ticket, read from the runnable tickets' partial index
    alone (a blocked ticket is never read), that no live claim holds."""
    return (f"SELECT t.id FROM tickets t WHERE t.status = 'pending' AND {RUNNABLE[dependencies]}"
            f" AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.ticket_id = t.id AND c.lease_until > {db.now_sql})"
            " ORDER BY t.created_at, t.id LIMIT 1" + db.skip_locked)


def schedule_retry(db: Any, conn: Any, ticket_id: str, retry: tuple[int, float] | None) -> dict[str, Any]:
    """Inside `end_run`, once the ticket's status is set: count a passing failure's retry and
    set when it is due (`retry` = (most retries, first wait in seconds), the wait doubling each
    time), or clear the retry state (`retry` None: the run ended for good, or as a person asked).
    What the run's `run_end` event says about it."""
    if retry is None:
        conn.execute("UPDATE tickets SET retries = 0, retry_at = NULL WHERE id = ?", (ticket_id,))
        return {}
    limit, wait_s = retry
    row = conn.execute("SELECT retries FROM tickets WHERE id = ?", (ticket_id,)).fetchone()
    attempt = int(row[0] or 0) + 1
    if attempt > limit:  # spent: a person resumes it (and its next passing failure counts from 1)
        conn.execute("UPDATE tickets SET retries = 0, retry_at = NULL WHERE id = ?", (ticket_id,))
        return {"retries_spent": limit}
    wait = wait_s * 2 ** (attempt - 1)
    conn.execute(f"UPDATE tickets SET retries = ?, retry_at = {db.lease_sql(wait)} WHERE id = ?",
                 (attempt, ticket_id))
    return {"retry": {"attempt": attempt, "of": limit, "in_s": wait}}


def migrate_queue(db: Any, conn: Any) -> None:
    """Schema 10 -> 11: the dependency edges of existing tickets, and their runs interrupted with
    no person behind them (a stopped worker, an outage) due for a retry now, as before."""
    for row in conn.execute("SELECT id, depends_on FROM tickets").fetchall():
        set_deps(conn, row[0], json.loads(row[1] or "[]"))
    for row in conn.execute("SELECT id FROM tickets WHERE status = 'interrupted'").fetchall():
        end = conn.execute(
            "SELECT e.data FROM run_events e JOIN runs r ON r.id = e.run_id WHERE r.ticket_id = ?"
            " AND e.kind = 'run_end' ORDER BY e.id DESC LIMIT 1", (row[0],)).fetchone()
        if end is not None and json.loads(end[0]).get("auto_resume"):
            conn.execute(f"UPDATE tickets SET retry_at = {db.now_sql} WHERE id = ?", (row[0],))
