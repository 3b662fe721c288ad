"""The end of a run, written in one transaction: run record, ticket status, claim, `run_end` event.

Every path that ends a run (the graph's finalize and fail nodes, the runner's error and Ctrl-C
paths, the server's shutdown and crash paths, the LangGraph Server entry) goes through
`end_run`, through `orchestrator.lifecycle.run_lifecycle.RunLifecycle`, so they cannot disagree. A run that
already ended is left alone (the call returns False): a node that re-runs on resume, or a
shutdown racing the run's own end, never ends a run twice or fires its hook twice.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from tickets.events import clip_event_data, insert_event
from tickets.model import RunStatus, TicketStatus, utc_now


class RunEnding:
    """The run-end method of TicketStore (needs its `_write`)."""

    if TYPE_CHECKING:  # provided by TicketStore, which this mixin is part of
        _db: Any

        def _write(self) -> AbstractContextManager[Any]: ...
        def _status_write(self) -> AbstractContextManager[Any]: ...

    def end_run(
        self,
        ticket_id: str,
        run_id: str,
        status: RunStatus | str,
        reason: str | None = None,
        *,
        ticket_status: TicketStatus | str | None = None,
        ticket_reason: str | None = None,
        event: dict[str, Any] | None = None,
        token: int | None = None,
        retry: tuple[int, float] | None = None,
        pr_due: str | None = None,
    ) -> bool:
        """End a running run: set its status, the ticket's status (unless another run has since
        claimed the ticket), release its claim and append its `run_end` event, atomically.

        `ticket_status` defaults to the run's status; `ticket_reason` to `reason`. Returns False,
        changing nothing, when the run is not running (it already ended). `token`: the owner's
        claim token; a stale owner (another runner took the run over) is refused with ClaimLost.
        `retry`: (most retries, first wait in seconds) when something passing stopped the run
        (tickets/queue.py): the attempt is counted and any worker resumes it once the wait is over.
        `pr_due`: what the end's hooks are to do to its pull request ("update", "open"), recorded
        with the end so a kill before they do it leaves it for `middle sync` (cleared once done).
        """
        from tickets.claims import _fence
        from tickets.queue import schedule_retry
        from tickets.runnable import put_status

        status = RunStatus(status)
        ticket_status = TicketStatus(ticket_status or status.value)
        now = utc_now()
        with self._status_write() as conn:
            row = conn.execute("SELECT status FROM runs WHERE id = ? AND ticket_id = ?" + self._db.lock_row,
                               (run_id, ticket_id)).fetchone()
            if row is None:
                raise ValueError(f"run {run_id!r} of ticket {ticket_id!r} does not exist")
            if row["status"] != RunStatus.RUNNING.value:
                return False
            _fence(self._db, conn, run_id, token)
            totals = conn.execute("SELECT COUNT(*) AS turns, COALESCE(SUM(cost_usd), 0) AS cost"
                                  " FROM turns WHERE run_id = ?", (run_id,)).fetchone()
            stamp = self._db.stamp_sql  # the database's clock: one clock for every machine's runs
            # The end hooks it owes (a complete or failed end), cleared once they all ran.
            hooks_due = {RunStatus.COMPLETE: "on_ticket_complete", RunStatus.FAILED: "on_ticket_failed"}.get(status)
            conn.execute(f"UPDATE runs SET status = ?, reason = ?, ended_at = {stamp}, total_cost_usd = ?,"
                         " pr_due = ?, hooks_due = ? WHERE id = ?",
                         (status.value, reason, totals["cost"], pr_due, hooks_due, run_id))
            if status is RunStatus.INTERRUPTED:
                conn.execute(f"UPDATE turns SET status = 'interrupted', error = ?, ended_at = {stamp}"
                             " WHERE run_id = ? AND status = 'running'", (reason, run_id))
            claim = conn.execute("SELECT run_id FROM claims WHERE ticket_id = ?", (ticket_id,)).fetchone()
            if claim is None or claim["run_id"] == run_id:
                put_status(self._db, conn, ticket_id, ticket_status.value,
                           ticket_reason if ticket_reason is not None else reason, now)
                conn.execute("DELETE FROM claims WHERE ticket_id = ? AND run_id = ?", (ticket_id, run_id))
                event = {**(event or {}), **schedule_retry(self._db, conn, ticket_id, retry)}
            data = {"status": status.value, "reason": reason or "", "turns": totals["turns"],
                    "cost_usd": totals["cost"], **(event or {})}
            insert_event(self._db, conn, run_id, ticket_id, "run_end",
                         json.dumps(clip_event_data(data), ensure_ascii=False, default=str), now)
        return True
