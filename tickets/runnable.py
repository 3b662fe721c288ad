"""Which tickets may start: `tickets.deps_met`, the store's own state, and its one owner.

`deps_met` says how far a ticket's dependencies have come: 2 every one merged (or none), 1 every
one complete or merged, 0 one still waits (or names no ticket). The claim (tickets/queue.py) reads
a partial index of the pending tickets whose `deps_met` lets them start, so a blocked backlog is
never scanned. Every write of a ticket's status (`put_status`) or of its dependency edges
(`set_deps`) goes through this module and recomputes, in the same transaction, the `deps_met` it
can change. On PostgreSQL those writes take one advisory lock first (`status_write`), so two of
them never compute a dependent from each other's uncommitted statuses (two dependencies of one
ticket that finish at the same moment); a claim (pending to running changes no dependent's
`deps_met`) takes none.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager
from typing import Any, Iterable, Iterator

# A ticket's `deps_met` from its edges and its dependencies' statuses (the one formula; in an
# UPDATE of `tickets`, or a SELECT naming the row `tickets`).
DEPS_MET_SQL = ("COALESCE((SELECT MIN(CASE u.status WHEN 'merged' THEN 2 WHEN 'complete' THEN 1 ELSE 0 END)"
                " FROM ticket_deps d LEFT JOIN tickets u ON u.id = d.depends_on WHERE d.ticket_id = tickets.id), 2)")
# What a dependency's status is worth to its dependents' `deps_met` (any other, or none: 0).
_LEVEL = {"merged": 2, "complete": 1}
# Per `[run] dependencies`: the pending tickets that may start. Literal SQL, the partial indexes'
# own predicates, so both engines' planners use them.
RUNNABLE = {"merged": "t.deps_met = 2", "complete": "t.deps_met >= 1"}
# "mdep": the lock that serialises the writes that can change a `deps_met` (PostgreSQL).
DEPS_LOCK_KEY = 0x6D646570
HOLD_IDLE = "30s"  # the longest a `status_write` may wait on its own client while it holds the lock


def set_deps(conn: Any, ticket_id: str, depends_on: Iterable[str]) -> None:
    """Inside a `status_write`: the ticket's dependency edges, as its `depends_on` says, and its
    `deps_met` from them."""
    conn.execute("DELETE FROM ticket_deps WHERE ticket_id = ?", (ticket_id,))
    for dep in dict.fromkeys(depends_on):
        conn.execute("INSERT INTO ticket_deps (ticket_id, depends_on) VALUES (?, ?)", (ticket_id, dep))
    conn.execute(f"UPDATE tickets SET deps_met = {DEPS_MET_SQL} WHERE id = ?", (ticket_id,))


def put_status(db: Any, conn: Any, ticket_id: str, status: str, reason: str | None, now: str, *,
               only_from: Iterable[str] | None = None, also: str = "") -> bool:
    """Inside a `status_write`: the one writer of a ticket's status (the claim's pending to
    running aside). Sets it (only if it is one of `only_from`, when given; `also`: more of the
    caller's constant assignments), then the `deps_met` of the tickets that depend on it and the
    idle workers' wake-up (`status_changed`). Whether the ticket was there (and allowed)."""
    row = conn.execute("SELECT status FROM tickets WHERE id = ?" + db.lock_row, (ticket_id,)).fetchone()
    if row is None or (only_from is not None and row[0] not in set(only_from)):
        return False
    conn.execute(f"UPDATE tickets SET status = ?, status_reason = ?, updated_at = ?{also} WHERE id = ?",
                 (status, reason, now, ticket_id))
    status_changed(db, conn, ticket_id, row[0], status)
    return True


def status_changed(db: Any, conn: Any, ticket_id: str, before: str | None, after: str) -> None:
    """Inside a `status_write`, once the ticket's status went from `before` (None: it did not
    exist) to `after`: recompute the `deps_met` of its dependents when that changes what it is
    worth to them, and wake idle workers when a ticket may start now (it is pending with its
    dependencies met, or a dependent's dependencies came further)."""
    was, now = _LEVEL.get(before or "", 0), _LEVEL.get(after, 0)
    raised = 0
    if was != now:
        cur = conn.execute(
            f"UPDATE tickets SET deps_met = {DEPS_MET_SQL} WHERE id IN"
            f" (SELECT ticket_id FROM ticket_deps WHERE depends_on = ?) AND deps_met <> {DEPS_MET_SQL}",
            (ticket_id,))
        raised = cur.rowcount if now > was else 0
    if raised or (after == "pending" and conn.execute(
            "SELECT 1 FROM tickets WHERE id = ? AND deps_met >= 1", (ticket_id,)).fetchone()):
        db.notify_runnable(conn)


@contextmanager
def locked_write(db: Any, write: AbstractContextManager[Any]) -> Iterator[Any]:
    """`write` (a store transaction) with `lock_deps` taken first: a `status_write`."""
    with write as conn:
        lock_deps(db, conn)
        yield conn


def lock_deps(db: Any, conn: Any) -> None:
    """The first statement of a `status_write` on PostgreSQL: one such write at a time, so each
    computes `deps_met` from committed statuses (READ COMMITTED: each statement sees what
    committed before it began). Taken before any row lock, so it adds no deadlock: a transaction
    that waits for it holds nothing yet."""
    if db.dialect == "postgres":
        # A holder that stops mid-transaction (SIGSTOP, a laptop lid) would hold every status
        # write of the fleet: the server ends its session after HOLD_IDLE, freeing the lock.
        conn.execute("SELECT set_config('idle_in_transaction_session_timeout', ?, true), pg_advisory_xact_lock(?)",
                     (HOLD_IDLE, DEPS_LOCK_KEY))


def recompute_deps_met(conn: Any) -> None:
    """Every ticket's `deps_met` from scratch (the schema 12 migration; a bench that filed its
    backlog with raw SQL)."""
    conn.execute(f"UPDATE tickets SET deps_met = {DEPS_MET_SQL}")
