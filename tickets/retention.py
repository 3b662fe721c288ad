"""Pruning what old runs leave behind (`middle gc --runs-older-than`, `[store] keep_days`).

A fleet writes thousands of run events an hour; the runs themselves, their turns and costs are
the history and stay. Of an ENDED run older than the cutoff the store drops its run events but
the two that say what it was: `run_end` (how it ended) and `feedback` (a person's words, which
also number the ticket's review rounds). A running run is never pruned, nor the latest run of a
ticket that can still be resumed (interrupted or failed): resuming needs what it recorded. The
caller drops the same runs' checkpoints (orchestrator/running/checkpoints.py).
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from tickets.errors import TicketError

KEPT_KINDS = ("run_end", "feedback")
PRUNE_CHUNK = 200  # runs per transaction
_UNITS = {"d": 86400, "h": 3600, "m": 60, "w": 7 * 86400}


def parse_age(text: str) -> timedelta:
    """'30d', '12h', '90m', '2w' as a duration; TicketError saying the form otherwise."""
    match = re.fullmatch(r"\s*(\d+)\s*([dhmw])\s*", text or "")
    if match is None or int(match.group(1)) <= 0:
        raise TicketError(f"{text!r} is not an age: give a whole number above 0 and a unit, e.g. 30d (days), 12h, "
                          "90m or 2w")
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


def cutoff(age: timedelta) -> str:
    """The end time before which a run counts as old, in the store's timestamp text."""
    return (datetime.now(timezone.utc) - age).isoformat(timespec="microseconds")


class RunRetention:
    """Pruning methods of TicketStore (needs its `_write` and `_read`)."""

    if TYPE_CHECKING:  # provided by TicketStore, which this mixin is part of
        def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]: ...
        def _write(self) -> AbstractContextManager[Any]: ...

    def prunable_runs(self, before: str) -> list[str]:
        """Ended runs that ended before `before` (store timestamp text), oldest first, that no
        claim holds and that are not the latest run of a ticket that is running, interrupted or
        failed (it may be resumed), with events left to prune."""
        rows = self._read(
            "SELECT r.id FROM runs r JOIN tickets t ON t.id = r.ticket_id WHERE r.status <> 'running'"
            " AND r.ended_at IS NOT NULL AND r.ended_at < ?"
            " AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.run_id = r.id)"
            " AND EXISTS (SELECT 1 FROM run_events e WHERE e.run_id = r.id AND e.kind NOT IN (?, ?))"
            " AND NOT (t.status IN ('running', 'interrupted', 'failed') AND NOT EXISTS"
            "   (SELECT 1 FROM runs n WHERE n.ticket_id = r.ticket_id AND n.started_at > r.started_at))"
            " ORDER BY r.ended_at, r.id", (before, *KEPT_KINDS))
        return [r[0] for r in rows]

    def prune_run_events(self, run_ids: list[str]) -> int:
        """Drop those runs' events (all but `run_end` and `feedback`) in one transaction (give
        at most PRUNE_CHUNK runs); how many. A run that started again meanwhile (resumed) is
        left alone. Prune its checkpoints first: a run with events left is found again."""
        marks = ",".join("?" * len(run_ids))
        with self._write() as conn:
            cur = conn.execute(
                f"DELETE FROM run_events WHERE run_id IN ({marks}) AND kind NOT IN (?, ?) AND run_id IN"
                f" (SELECT id FROM runs WHERE id IN ({marks}) AND status <> 'running')",
                (*run_ids, *KEPT_KINDS, *run_ids))
            return max(cur.rowcount, 0)
