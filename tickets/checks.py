"""The project's checks as the ticket store keeps them: each check command's result on a base
commit (run once per base commit and command, shared by every ticket and machine that starts from
that commit), and a run's check outcome and corrections (check failures fed back to the middle
agent before it passed).

A result is stored as JSON (`{"command", "exit_code", "duration_s", "tail", "timed_out",
"failing"}`) and read back as data only.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from tickets.model import utc_now

CHECKS_SINCE = 9  # the ticket store's schema version that added the check loop
CHECKS_SCHEMA = """;
CREATE TABLE IF NOT EXISTS check_baselines (
    base_commit TEXT NOT NULL,
    command TEXT NOT NULL,
    result TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (base_commit, command)
)
"""


class TicketChecks:
    """Check methods of TicketStore (needs its `_write` and `_read`)."""

    if TYPE_CHECKING:  # provided by TicketStore, which this mixin is part of
        _db: Any

        def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]: ...
        def _write(self) -> AbstractContextManager[Any]: ...

    def check_baseline(self, base_commit: str, command: str) -> dict[str, Any] | None:
        """The command's stored result on the base commit, or None when it has not run there."""
        rows = self._read("SELECT result FROM check_baselines WHERE base_commit = ? AND command = ?",
                          (base_commit, command))
        if not rows:
            return None
        try:
            data = json.loads(rows[0]["result"])
        except json.JSONDecodeError:
            return None  # damaged: run it again (the next put replaces it)
        return data if isinstance(data, dict) else None

    def put_check_baseline(self, base_commit: str, command: str, result: dict[str, Any]) -> None:
        """Keep the command's result on the base commit (the first one stored wins a race: both
        ran the same command on the same commit)."""
        with self._write() as conn:
            conn.execute("INSERT INTO check_baselines (base_commit, command, result, at) VALUES (?, ?, ?, ?)"
                         " ON CONFLICT (base_commit, command) DO NOTHING",
                         (base_commit, command, json.dumps(result, ensure_ascii=False), utc_now()))

    def check_outcomes(self) -> dict[str, tuple[str, int, str | None]]:
        """Each ticket's latest run's check outcome and corrections, for tickets whose latest run
        ran a check: ticket id -> (check status, corrections, note: what a "no worse" check had
        failing on the base). (A store a read-only command opened
        before any newer `middle` migrated it has no such column yet: then none ran.)"""
        if self._read("SELECT MAX(version) AS v FROM schema_version")[0]["v"] < CHECKS_SINCE:
            return {}
        rows = self._read(
            "SELECT r.ticket_id, r.check_status, r.corrections, r.check_note FROM runs r"
            " WHERE r.check_status IS NOT NULL"
            f" AND r.{self._db.order_col} = (SELECT l.{self._db.order_col} FROM runs l WHERE l.ticket_id = r.ticket_id"
            f" ORDER BY l.started_at DESC, l.{self._db.order_col} DESC LIMIT 1)")
        return {r["ticket_id"]: (r["check_status"], int(r["corrections"] or 0), r["check_note"]) for r in rows}
