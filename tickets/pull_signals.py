"""What a ticket's pull request asked for that a round has acted on: each failed CI check, commit
status and changes-requested review once (orchestrator.github.signals reads them from GitHub),
and how many rounds a pull request has started by itself (`[github] auto_rounds` caps them).

A row per signal: (ticket, signal key such as `review:123`, the pull request's URL, the run of
the round it started, or NULL when it was set aside for a person).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NamedTuple

from tickets.model import utc_now

PULL_SIGNALS_SCHEMA = """;
CREATE TABLE IF NOT EXISTS pr_signals (
    ticket_id TEXT NOT NULL,
    signal TEXT NOT NULL,
    pr_url TEXT NOT NULL,
    run_id TEXT,
    at TEXT NOT NULL,
    PRIMARY KEY (ticket_id, signal)
)
"""


class PullAsks(NamedTuple):
    """What a pull request asks for, acted on by a review round: its URL and the signal keys."""
    pr_url: str
    keys: tuple[str, ...]


class SignalsTaken(Exception):
    """Another process took some of these signals first (it acts on them): nothing was written."""


def take_signals(conn: Any, ticket_id: str, asks: PullAsks, run_id: str) -> None:
    """Inside the transaction that opens the round acting on them (or stores them for the run in
    progress): the signals recorded as acted on by `run_id`. Recorded apart, a kill between the two
    writes left them taken with no round (the request lost), or a round not counted against
    `[github] auto_rounds`. SignalsTaken (the transaction rolls back) when another process took one."""
    for signal in asks.keys:
        cur = conn.execute("INSERT INTO pr_signals (ticket_id, signal, pr_url, run_id, at) VALUES"
                           " (?, ?, ?, ?, ?) ON CONFLICT (ticket_id, signal) DO NOTHING",
                           (ticket_id, signal, asks.pr_url, run_id, utc_now()))
        if not cur.rowcount:
            raise SignalsTaken(f"signal {signal} of ticket {ticket_id} is acted on by another process")


class PullSignalRecord:
    """Pull-request signal methods of TicketStore (needs its `_write` and `_read`)."""

    if TYPE_CHECKING:  # provided by TicketStore, which this mixin is part of
        _db: Any

        def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]: ...
        def _write(self) -> AbstractContextManager[Any]: ...

    def acted_signals(self, ticket_id: str) -> set[str]:
        """The signal keys of the ticket's pull requests already acted on (or set aside)."""
        return {r["signal"] for r in self._read("SELECT signal FROM pr_signals WHERE ticket_id = ?", (ticket_id,))}

    def mark_signals(self, ticket_id: str, pr_url: str, signals: list[str], run_id: str | None) -> list[str]:
        """Record signals as acted on by the round `run_id` (None: set aside for a person); the
        ones this call recorded (another process may have taken some first)."""
        taken = []
        with self._write() as conn:
            for signal in signals:
                cur = conn.execute("INSERT INTO pr_signals (ticket_id, signal, pr_url, run_id, at) VALUES"
                                   " (?, ?, ?, ?, ?) ON CONFLICT (ticket_id, signal) DO NOTHING",
                                   (ticket_id, signal, pr_url, run_id, utc_now()))
                if cur.rowcount:
                    taken.append(signal)
        return taken

    def auto_rounds(self, ticket_id: str, pr_url: str) -> int:
        """How many rounds the pull request has started by itself."""
        rows = self._read("SELECT COUNT(DISTINCT run_id) AS n FROM pr_signals WHERE ticket_id = ? AND pr_url = ?"
                          " AND run_id IS NOT NULL AND run_id != ''", (ticket_id, pr_url))
        return int(rows[0]["n"]) if rows else 0
