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

from tickets.claims import _fence
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


RECORDER = "recorded_by"  # the run and token that measured a stored base result


def measured(result: dict[str, Any]) -> bool:
    """Whether a check result is a measurement: its command ran to an exit of its own (not
    killed by a signal, timed out or cancelled: an exit code None or negative)."""
    code = result.get("exit_code")
    return isinstance(code, int) and not isinstance(code, bool) and code >= 0 and not result.get("timed_out")


def _parsed(raw: str) -> dict[str, Any] | None:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return None  # damaged: run it again (the next put replaces it)
    return data if isinstance(data, dict) else None


class TicketChecks:
    """Check methods of TicketStore (needs its `_write` and `_read`)."""

    if TYPE_CHECKING:  # provided by TicketStore, which this mixin is part of
        _db: Any

        def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]: ...
        def _write(self) -> AbstractContextManager[Any]: ...

    def check_baseline(self, base_commit: str, command: str) -> dict[str, Any] | None:
        """The command's stored result on the base commit, or None when it has not run there or
        its result is not trusted (then it is measured again, and the new one replaces it)."""
        rows = self._read("SELECT result FROM check_baselines WHERE base_commit = ? AND command = ?",
                          (base_commit, command))
        if not rows:
            return None
        data = _parsed(rows[0]["result"])
        if data is None or not self._trusted(data, self._read):
            return None
        data.pop(RECORDER, None)
        return data

    def put_check_baseline(self, base_commit: str, command: str, result: dict[str, Any], *,
                           run_id: str | None = None, token: int | None = None) -> bool:
        """Keep the command's result on the base commit; whether it was stored. A result that is
        no measurement (killed, timed out, cancelled: exit code None or negative) is never
        stored. With `token`, the write is fenced (ClaimLost once run `run_id` is another
        runner's) and records who measured it. A trusted result already stored wins a race (both
        ran the same command on the same commit); an untrusted one is replaced."""
        if not measured(result):
            return False
        stored = {**result, RECORDER: {"run_id": run_id, "token": token}} if run_id else dict(result)
        with self._write() as conn:
            _fence(self._db, conn, run_id or "", token)
            row = conn.execute("SELECT result FROM check_baselines WHERE base_commit = ? AND command = ?",
                               (base_commit, command)).fetchone()
            if row is not None:
                old = _parsed(row["result"])

                def read(sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
                    return list(conn.execute(sql, params).fetchall())

                # (a result kept in another format, by an older middle, is replaced too)
                if old is not None and old.get("format") == result.get("format") and self._trusted(old, read):
                    return False
            conn.execute("INSERT INTO check_baselines (base_commit, command, result, at) VALUES (?, ?, ?, ?)"
                         " ON CONFLICT (base_commit, command) DO UPDATE SET result = excluded.result,"
                         " at = excluded.at",
                         (base_commit, command, json.dumps(stored, ensure_ascii=False), utc_now()))
        return True

    def drop_check_baselines(self) -> int:
        """Forget every stored base-commit result (`middle gc --baselines`): each is measured
        again by the next ticket that starts from its commit. How many were dropped."""
        with self._write() as conn:
            return int(conn.execute("DELETE FROM check_baselines").rowcount or 0)

    @staticmethod
    def _trusted(data: dict[str, Any], read: Any) -> bool:
        """A stored result is trusted when it is a measurement and the run that recorded it was
        not taken over since (its claim now carries a later token: it was lost, and what it
        measured then is not relied on)."""
        if not measured(data):
            return False
        by = data.get(RECORDER)
        if not isinstance(by, dict) or not isinstance(by.get("token"), int):
            return True
        rows = read("SELECT token FROM claims WHERE run_id = ?", (str(by.get("run_id")),))
        return not rows or int(rows[0][0]) <= by["token"]

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
