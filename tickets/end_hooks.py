"""Which plugins' end hooks (on_ticket_complete, on_ticket_failed) have run for a run, so that a
process killed between a run's end and its hooks leaves them to `middle sync`, which runs each
one not recorded (orchestrator/lifecycle/run_lifecycle.py catch_up_end_hooks).

`runs.hooks_due` names the hook a run's end owes (written in the end's transaction) and is
cleared once every plugin's hook ran; `end_hooks` holds one row per plugin whose hook returned,
by a key every process gives it alike (orchestrator.plugins.manager.hook_keys)
(written right after it, kill point `run.hooked` between): a kill skips none, and a kill between
a hook and its row repeats only that one (schema 18)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

END_HOOKS_SINCE = 18  # the schema version that added end_hooks and runs.hooks_due
# Every `middle sync` looks for runs whose end owes something (hooks_due, pr_due): few rows of a
# table that grows with every run, found by partial indexes that hold only those (schema 19),
# made after a migration has added the columns (as the queue's indexes).
DUE_INDEXES = (
    "CREATE INDEX IF NOT EXISTS runs_hooks_due ON runs(ended_at) WHERE hooks_due IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS runs_pr_due ON runs(ticket_id) WHERE pr_due IS NOT NULL",
)
END_HOOKS_SCHEMA = """;
CREATE TABLE IF NOT EXISTS end_hooks (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    plugin TEXT NOT NULL,
    PRIMARY KEY (run_id, plugin)
)
"""


def _seconds_between(earlier: object, later: object) -> float:
    """Seconds from one stored stamp to another; a stamp that does not parse (stored state is
    untrusted) counts as long ago, so its hooks are not held back for good."""
    try:
        return (datetime.fromisoformat(str(later)) - datetime.fromisoformat(str(earlier))).total_seconds()
    except ValueError:
        return float("inf")


class EndHookRecord:
    """End-hook methods of TicketStore (needs its `_write`, `_read` and `version`)."""

    if TYPE_CHECKING:  # provided by TicketStore, which this mixin is part of
        version: int
        _db: Any

        def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]: ...
        def _write(self) -> AbstractContextManager[Any]: ...

    def mark_end_hook(self, run_id: str, plugin: str) -> None:
        """The plugin's end hook of the run returned (or raised: it ran, and is not run again)."""
        with self._write() as conn:
            conn.execute("INSERT INTO end_hooks (run_id, plugin) VALUES (?, ?) ON CONFLICT DO NOTHING",
                         (run_id, plugin))

    def end_hooks_ran(self, run_id: str) -> set[str]:
        if self.version < END_HOOKS_SINCE:  # a read-only store not migrated yet: none recorded
            return set()
        return {row[0] for row in self._read("SELECT plugin FROM end_hooks WHERE run_id = ?", (run_id,))}

    def hooks_due(self, ended_s_ago: float = 0.0) -> list[tuple[str, str, str]]:
        """(ticket id, run id, hook) of each run that ended at least `ended_s_ago` seconds ago (by
        the database's clock) and whose end hooks have not all run, oldest first. (A run that
        ended just now may have its process running its hooks still: not due yet.)"""
        if self.version < END_HOOKS_SINCE:
            return []
        rows = self._read(f"SELECT ticket_id, id, hooks_due, ended_at, {self._db.stamp_sql} FROM runs "
                          "WHERE hooks_due IS NOT NULL ORDER BY ended_at")
        return [(str(r[0]), str(r[1]), str(r[2])) for r in rows if _seconds_between(r[3], r[4]) >= ended_s_ago]

    def pr_due_tickets(self) -> list[str]:
        """The complete tickets with a complete run whose end asked something of its pull
        request not done yet (runs.pr_due), by the index runs_pr_due: `middle sync` reads those
        alone, where it read every complete ticket's latest run."""
        if self.version < 17:  # a read-only store not migrated yet: no pr_due column
            return []
        rows = self._read("SELECT t.id FROM tickets t WHERE t.status = 'complete' AND t.id IN (SELECT r.ticket_id "
                          "FROM runs r WHERE r.pr_due IS NOT NULL AND r.status = 'complete') "
                          "ORDER BY t.created_at, t.id")  # (list_tickets' order, as before)
        return [str(r[0]) for r in rows]

    def clear_hooks_due(self, run_id: str) -> None:
        """Every plugin's end hook of the run has run."""
        with self._write() as conn:
            conn.execute("UPDATE runs SET hooks_due = NULL WHERE id = ?", (run_id,))


__all__ = ["DUE_INDEXES", "END_HOOKS_SCHEMA", "END_HOOKS_SINCE", "EndHookRecord"]
