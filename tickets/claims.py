"""Ticket claims: one run per ticket across processes, with a lease refreshed while it runs.

A runner claims a ticket in one transaction that checks the ticket's status and any live claim,
creates the run and marks the ticket running; a second runner then skips it. A claim is live while
its lease has not expired and, on this host, its process still exists (the same process: its
start time is recorded, so a reused pid does not count); a dead claim (a process
killed with -9, a crashed machine) is taken over by `middle resume`. This is the SQLite version of
a row claim; on PostgreSQL the same interface maps to `SELECT ... FOR UPDATE SKIP LOCKED`.

Leases are set and judged by the database's clock (`db.now_sql`), so machines whose clocks
disagree agree on whose lease ran out. Every claim, takeover and hold raises the ticket's `fence`
counter and gives the claim that number as its token: a run's writes to shared state name their
token (`check_fence`), and once another runner has taken the run over, a stale owner's write is
refused with ClaimLost inside the same transaction (the fencing token of a lease-based lock).
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from tickets.errors import ClaimLost, TicketError
from tickets.model import RunStatus, utc_now
from tickets.procs import process_token, same_process

CLAIMS_SCHEMA = """;
CREATE TABLE IF NOT EXISTS claims (
    ticket_id TEXT PRIMARY KEY REFERENCES tickets(id) ON DELETE CASCADE,
    run_id TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    claimed_at TEXT NOT NULL,
    lease_until TEXT NOT NULL,
    owner_start TEXT,
    token INTEGER NOT NULL DEFAULT 0
)
"""

DEFAULT_LEASE_S = 120.0


@dataclass(frozen=True)
class Claim:
    ticket_id: str
    run_id: str
    host: str
    pid: int
    claimed_at: str
    lease_until: str
    owner_start: str | None = None  # the owner's process_token: a reused pid is not the owner
    token: int = 0  # the fencing token: raised by every claim and takeover of the ticket
    # Whether the lease had run out by the database's clock when the claim was read (None: a
    # claim made in code, judged by this machine's clock).
    expired: bool | None = None

    def describe(self) -> str:
        return f"run {self.run_id} (pid {self.pid} on {self.host}, claimed {self.claimed_at[:19]}Z)"


HOST_VARIABLE = "MIDDLE_HOSTNAME"


def this_host() -> str:
    """The name this machine's claims carry: MIDDLE_HOSTNAME when set (tests that play two
    machines on one; a container whose hostname is not stable), else the hostname."""
    import socket

    return os.environ.get(HOST_VARIABLE) or socket.gethostname()


def owner_died(claim: Claim) -> bool:
    """Whether this machine can see the claim's owner is gone: its pid is dead, a zombie, or
    now another process (a later start time than the one recorded with the claim)."""
    return claim.host == this_host() and not same_process(claim.pid, claim.owner_start)


def died_note(claim: Claim | None) -> str | None:
    """For a ticket left `running`: a short note when its claim's owner died on this machine."""
    if claim is None or not owner_died(claim):
        return None
    return f"its run died (pid {claim.pid})"  # the CLI adds what to do next


def claim_is_live(claim: Claim) -> bool:
    """Live while the lease holds (by the database's clock when read from the store) and, on this
    host, the claiming process still exists."""
    expired = claim.lease_until <= utc_now() if claim.expired is None else claim.expired
    if expired:
        return False
    return not owner_died(claim)


class TicketClaims:
    """Claim methods of TicketStore (needs its `_write`, `_read` and `path`)."""

    if TYPE_CHECKING:  # provided by TicketStore, which this mixin is part of
        _db: Any

        def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]: ...
        def _write(self) -> AbstractContextManager[Any]: ...
        def _status_write(self) -> AbstractContextManager[Any]: ...

    def _claims_sql(self) -> str:
        """SELECT claims with whether each lease ran out by the database's clock."""
        return f"SELECT *, (lease_until <= {self._db.now_sql}) AS expired FROM claims"

    def get_claim(self, ticket_id: str) -> Claim | None:
        rows = self._read(self._claims_sql() + " WHERE ticket_id = ?", (ticket_id,))
        return _claim(rows[0]) if rows else None

    def claim_of_run(self, run_id: str) -> Claim | None:
        """The claim held for this run now (None: released, or the ticket claimed for another run)."""
        rows = self._read(self._claims_sql() + " WHERE run_id = ?", (run_id,))
        return _claim(rows[0]) if rows else None

    def check_fence(self, run_id: str, token: int) -> None:
        """Raise ClaimLost unless the claim of `run_id` still carries `token` (a read, before a
        step outside the store; the store's own writes check it in their transaction, `_fence`)."""
        rows = self._read("SELECT token FROM claims WHERE run_id = ?", (run_id,))
        if not rows or int(rows[0][0]) != token:
            raise ClaimLost(lost_message(run_id, self._read(_HOLDER_SQL, (run_id,))))

    def claim_new_run(
        self, ticket_id: str, allowed: Iterable[str], *, lease_s: float = DEFAULT_LEASE_S,
        pid: int | None = None,
    ) -> str | None:
        """Atomically: if the ticket's status is in `allowed` and no live claim holds it, create a
        run, claim the ticket for it and mark it running. Returns the run id, or None when the
        ticket is not claimable (another process has it, or its status changed)."""
        from tickets.runnable import put_status

        allowed = {getattr(s, "value", s) for s in allowed}
        with self._status_write() as conn:  # from complete or merged, say: dependents follow
            # On PostgreSQL the row is locked for this transaction, and a runner that finds it
            # locked by another skips it (SKIP LOCKED); on SQLite BEGIN IMMEDIATE already
            # serialises the writers.
            row = conn.execute("SELECT status FROM tickets WHERE id = ?" + self._db.skip_locked,
                               (ticket_id,)).fetchone()
            if row is None:
                if conn.execute("SELECT 1 FROM tickets WHERE id = ?", (ticket_id,)).fetchone() is None:
                    raise TicketError(f"no ticket '{ticket_id}': list them with `middle tickets`")
                return None  # being claimed by another runner right now
            if row["status"] not in allowed or self._live_claim(conn, ticket_id):
                return None
            import uuid

            run_id = uuid.uuid4().hex
            now = utc_now()
            conn.execute("INSERT INTO runs (id, ticket_id, status, started_at)"
                         f" VALUES (?, ?, ?, {self._db.stamp_sql})", (run_id, ticket_id, RunStatus.RUNNING.value))
            self._put_claim(conn, ticket_id, run_id, lease_s, pid)
            put_status(self._db, conn, ticket_id, "running", None, now, also=", retries = 0, retry_at = NULL")
        return run_id

    def claim_for_resume(self, ticket_id: str, run_id: str, *, lease_s: float = DEFAULT_LEASE_S,
                         pid: int | None = None) -> int:
        """Take the claim on an existing run (a resume, a takeover); refused while another live
        claim holds it. Returns the new claim's token: the earlier owner's writes are refused."""
        from tickets.runnable import put_status

        with self._status_write() as conn:
            conn.execute("SELECT 1 FROM tickets WHERE id = ?" + self._db.lock_row, (ticket_id,))
            live = self._live_claim(conn, ticket_id)
            if live is not None and live.pid != (pid or os.getpid()):
                raise TicketError(
                    f"ticket {ticket_id!r} is being worked by {live.describe()}: wait for it to "
                    "finish (`middle tickets`), or stop that process first")
            token = self._put_claim(conn, ticket_id, run_id, lease_s, pid)
            conn.execute("UPDATE runs SET status = 'running', reason = NULL, ended_at = NULL WHERE id = ?",
                         (run_id,))
            # A retry due later is moot now (its count stays: tickets/queue.py bounds the run's).
            put_status(self._db, conn, ticket_id, "running", None, utc_now(), also=", retry_at = NULL")
        return token

    def hold(self, ticket_id: str, run_id: str, statuses: Iterable[str], *,
             lease_s: float = DEFAULT_LEASE_S) -> bool:
        """Claim a ticket whose status is one of `statuses` for a step on its run `run_id` that two
        processes (or machines) must not take at once, such as opening its pull request, leaving
        its status as it is. False when another live claim holds it or its status changed; give
        the hold back with `release_hold`."""
        allowed = {getattr(s, "value", s) for s in statuses}
        with self._write() as conn:
            row = conn.execute("SELECT status FROM tickets WHERE id = ?" + self._db.lock_row, (ticket_id,)).fetchone()
            if row is None:
                raise TicketError(f"no ticket '{ticket_id}': list them with `middle tickets`")
            if row["status"] not in allowed or self._live_claim(conn, ticket_id):
                return False
            self._put_claim(conn, ticket_id, run_id, lease_s, None)
        return True

    def release_hold(self, ticket_id: str, run_id: str) -> None:
        """Give back this process's `hold` (another's claim is left alone)."""
        with self._write() as conn:
            conn.execute("DELETE FROM claims WHERE ticket_id = ? AND run_id = ? AND host = ? AND pid = ?",
                         (ticket_id, run_id, this_host(), os.getpid()))

    def refresh_claim(self, ticket_id: str, run_id: str, lease_s: float = DEFAULT_LEASE_S, *,
                      token: int | None = None) -> bool:
        """Extend our lease (by the database's clock); False when the claim is no longer ours
        (then stop working). With `token`, ours means that token; else this host and process."""
        owner, params = ("token = ?", (token,)) if token is not None else ("host = ? AND pid = ?",
                                                                          (this_host(), os.getpid()))
        with self._write() as conn:
            cur = conn.execute(f"UPDATE claims SET lease_until = {self._db.lease_sql(lease_s)}"
                               f" WHERE ticket_id = ? AND run_id = ? AND {owner}", (ticket_id, run_id, *params))
            return cur.rowcount == 1

    # -- helpers ----------------------------------------------------------------------------
    def _live_claim(self, conn: sqlite3.Connection, ticket_id: str) -> Claim | None:
        row = conn.execute(self._claims_sql() + " WHERE ticket_id = ?", (ticket_id,)).fetchone()
        if row is None:
            return None
        claim = _claim(row)
        return claim if claim_is_live(claim) else None

    def _put_claim(self, conn: Any, ticket_id: str, run_id: str, lease_s: float, pid: int | None) -> int:
        """The one writer of claims: claim the ticket for `run_id`, raising its fence; the token."""
        pid = pid or os.getpid()
        row = conn.execute("UPDATE tickets SET fence = fence + 1 WHERE id = ? RETURNING fence", (ticket_id,)).fetchone()
        token = int(row[0])
        conn.execute(
            "INSERT INTO claims (ticket_id, run_id, host, pid, claimed_at, lease_until, owner_start, token)"
            f" VALUES (?, ?, ?, ?, ?, {self._db.lease_sql(lease_s)}, ?, ?) ON CONFLICT (ticket_id) DO UPDATE"
            " SET run_id = excluded.run_id, host = excluded.host, pid = excluded.pid,"
            " claimed_at = excluded.claimed_at, lease_until = excluded.lease_until,"
            " owner_start = excluded.owner_start, token = excluded.token",
            (ticket_id, run_id, this_host(), pid, utc_now(), process_token(pid), token))
        return token


def _claim(row: Any) -> Claim:
    data = dict(row)
    data["expired"] = bool(data["expired"])
    return Claim(**data)


def _fence(db: Any, conn: Any, run_id: str, token: int | None) -> None:
    """Inside a write transaction: refuse the write (ClaimLost) unless run `run_id` is still
    claimed with `token`. None: an unfenced write (a person's command, not a run's owner). On
    PostgreSQL the claim row is share-locked, so a takeover waits for this write to commit."""
    if token is None:
        return
    row = conn.execute("SELECT token FROM claims WHERE run_id = ?" + db.share_row, (run_id,)).fetchone()
    if row is None or int(row[0]) != token:
        raise ClaimLost(lost_message(run_id, conn.execute(_HOLDER_SQL, (run_id,)).fetchall()))


# Who holds the claim on the ticket of a run now (a takeover of the run, or another run of it).
_HOLDER_SQL = ("SELECT c.host, c.pid, c.run_id FROM claims c JOIN runs r ON r.ticket_id = c.ticket_id"
               " WHERE r.id = ?")


def lost_message(run_id: str, holder: list[Any]) -> str:
    """Why a run's owner may not write any more, naming the runner that holds its ticket now
    (`holder`: the rows of `_HOLDER_SQL`; none: the run ended, or its claim was released)."""
    if holder:
        host, pid, other = holder[0][0], holder[0][1], holder[0][2]
        which = "took it over" if other == run_id else f"claimed its ticket for run {other}"
        return (f"run {run_id} is no longer this process's to write: the worker on {host} (pid {pid}) "
                f"{which}; this runner stopped it here and wrote nothing more")
    return (f"run {run_id} is no longer this process's to write: it ended, or its claim was released, "
            "elsewhere; this runner stopped it here and wrote nothing more")
