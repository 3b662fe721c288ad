"""Review rounds: the human's feedback on a ticket, stored as `feedback` run events.

A round continues a complete (or conflicted) ticket on its branch: `claim_round` creates the
round's run with the previous run's git record (same branch, worktree and start commit, so the
diff is the whole change), claims the ticket and stores the feedback that opens the round, in one
transaction; if a live claim holds the ticket by then, the same transaction stores the feedback
for that run instead, so feedback sent at once by several people is never lost. Feedback sent
while a run goes on is an event of that run, read at its next assess.
The event data: {"text", "round"} (and "carried": earlier undelivered feedback, "conflict": why
the merge failed) for the one that opens a round, {"text"} for the others; "by" when no person
wrote it: what started it ("pull request #2: CI `tests`, review by alice"), shown in its label.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NamedTuple

from tickets.events import insert_event
from tickets.model import RunStatus, utc_now
from tickets.pull_signals import PullAsks, take_signals

FEEDBACK = "feedback"  # the run event kind
MAX_FEEDBACK_CHARS = 4000  # a run event's text limit (tickets.events.MAX_EVENT_TEXT): never cut
# What a round's run carries over from the run before it: where the change lives.
CARRIED = ("isolation", "repo", "base_branch", "base_commit", "branch", "worktree", "head_commit",
           "changes", "pr_url", "pr_state")  # (its pull request too: the round's commits go to it)
# The ticket statuses a round starts from ("failed": only a failed ticket whose work is on its
# branch, which orchestrator.running.feedback.check lets through).
ROUND_STATUSES = ("complete", "conflict", "failed")
ROUND = "round"  # the feedback opened a new round
STORED = "stored"  # the feedback was stored for the run in progress: read at its next assess


HUMAN = "the human's feedback"  # the label of feedback a person gave (`middle feedback`, the board)
MAX_BY_CHARS = 300  # what started a round, as its label says it


def feedback_label(data: dict[str, Any]) -> str:
    """How a feedback event is labelled (`middle log`, the ticket page, the agent's history): by
    what started it, a CI run or a reviewer on the pull request, else the human's. The stored
    `by` is untrusted: anything but a short string is the human's."""
    by = data.get("by")
    if isinstance(by, str) and by.strip():
        return "feedback from " + " ".join(by.split())[:MAX_BY_CHARS]
    return HUMAN


class Delivered(NamedTuple):
    """Where one feedback went: a new round (`number` = its round) or the run in progress
    (`number` = the feedback event's id)."""

    kind: str  # ROUND or STORED
    run_id: str
    number: int


class TicketRounds:
    """Round methods of TicketStore (needs its `_write`, `_read`, `_put_claim`, `_live_claim`)."""

    if TYPE_CHECKING:  # provided by TicketStore, which this mixin is part of
        _db: Any

        def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]: ...
        def _write(self) -> AbstractContextManager[Any]: ...
        def _status_write(self) -> AbstractContextManager[Any]: ...
        def _live_claim(self, conn: Any, ticket_id: str) -> Any: ...
        def _put_claim(self, conn: Any, ticket_id: str, run_id: str, lease_s: float, pid: int | None) -> int: ...

    def claim_round(self, ticket_id: str, text: str, *, lease_s: float,
                    carry: list[str] | None = None, or_store: bool = True, by: str | None = None,
                    asks: PullAsks | None = None) -> Delivered | None:
        """Deliver the human's feedback atomically: if the ticket is complete or conflicted and
        unclaimed, start its next round (`Delivered(ROUND, run id, round number)`); if a live
        claim holds it (another process started a round or a run meanwhile), store the feedback
        for that run, which reads it at its next assess (`Delivered(STORED, run id, event id)`).
        None, changing nothing, when it is neither (any more).

        `carry`: earlier feedback the previous run never delivered, put before `text`.
        `or_store=False`: only start a round (None when a live claim holds the ticket).
        `by`: what started it when no person did (a pull request's CI or review), for its label.
        `asks`: the pull request's signals it acts on, recorded in the same transaction
        (SignalsTaken, nothing written, when another process took one first)."""
        import uuid

        from tickets.runnable import put_status

        with self._status_write() as conn:  # the ticket leaves complete: its dependents' deps_met follow
            # FOR UPDATE (not SKIP LOCKED): a second feedback waits for the first's claim to
            # commit and then stores its words for that round, instead of finding nothing.
            row = conn.execute("SELECT status, status_reason FROM tickets WHERE id = ?" + self._db.lock_row,
                               (ticket_id,)).fetchone()
            if row is None:
                return None
            live = self._live_claim(conn, ticket_id)
            if live is not None and not or_store:
                return None
            if live is not None:
                event = insert_event(self._db, conn, live.run_id, ticket_id, FEEDBACK,
                                     json.dumps(_with_by({"text": text}, by), ensure_ascii=False), utc_now())
                if asks is not None:
                    take_signals(conn, ticket_id, asks, live.run_id)
                return Delivered(STORED, live.run_id, event)
            if row["status"] not in ROUND_STATUSES:
                return None
            previous = conn.execute(
                f"SELECT * FROM runs WHERE ticket_id = ? ORDER BY started_at DESC, {self._db.order_col} DESC"
                " LIMIT 1", (ticket_id,)).fetchone()
            if previous is None:
                return None
            number = _round_of(conn, previous["id"]) + 1
            run_id, now = uuid.uuid4().hex, utc_now()
            conn.execute(
                f"INSERT INTO runs (id, ticket_id, status, started_at, {', '.join(CARRIED)}) VALUES"
                f" (?, ?, ?, {self._db.stamp_sql}, {', '.join('?' * len(CARRIED))})",
                (run_id, ticket_id, RunStatus.RUNNING.value, *(previous[c] for c in CARRIED)))
            self._put_claim(conn, ticket_id, run_id, lease_s, None)
            put_status(self._db, conn, ticket_id, "running", None, now)
            data: dict[str, Any] = _with_by({"text": text, "round": number}, by)
            if carry:
                data["carried"] = carry
            if row["status"] == "conflict":  # the round's agent is told why the merge failed
                data["conflict"] = row["status_reason"] or "its branch conflicts with the base branch"
            insert_event(self._db, conn, run_id, ticket_id, FEEDBACK, json.dumps(data, ensure_ascii=False), now)
            if asks is not None:
                take_signals(conn, ticket_id, asks, run_id)
        return Delivered(ROUND, run_id, number)

    def add_feedback(self, ticket_id: str, run_id: str, text: str, by: str | None = None,
                     asks: PullAsks | None = None) -> int | None:
        """Store feedback for a run that goes on (or will, resumed): read at its next assess; its
        event id. None, storing nothing, when the run has completed meanwhile: the caller opens
        the next round with it instead (a run's end and this insert take turns on the run's row,
        so feedback is either in the run before its end, where the runner finds it undelivered
        and continues with it, or refused here)."""
        with self._write() as conn:
            row = conn.execute("SELECT status FROM runs WHERE id = ?" + self._db.lock_row, (run_id,)).fetchone()
            if row is None or row["status"] == RunStatus.COMPLETE.value:
                return None
            event = insert_event(self._db, conn, run_id, ticket_id, FEEDBACK,
                                 json.dumps(_with_by({"text": text}, by), ensure_ascii=False), utc_now())
            if asks is not None:  # (a pull request's signals: recorded with it, see claim_round)
                take_signals(conn, ticket_id, asks, run_id)
            return event

    def feedback(self, run_id: str) -> list[dict[str, Any]]:
        """The run's feedback events, oldest first: {"id", "text", "round" (opening one only), "at",
        "by" (when no person gave it), "label" (how it is shown: `feedback_label`)}."""
        rows = self._read("SELECT id, data, at FROM run_events WHERE run_id = ? AND kind = ? ORDER BY id",
                          (run_id, FEEDBACK))
        found = [{"id": int(r["id"]), "at": r["at"], **json.loads(r["data"])} for r in rows]
        return [{**event, "label": feedback_label(event)} for event in found]

    def round_of(self, run_id: str) -> int:
        """The run's round: 1 for a ticket's first run (or a rerun), n for the n-th review round."""
        rows = self._read("SELECT data FROM run_events WHERE run_id = ? AND kind = ? ORDER BY id LIMIT 1",
                          (run_id, FEEDBACK))
        return int(json.loads(rows[0]["data"]).get("round") or 1) if rows else 1

    def retire_memory_docs(self, ticket_id: str, docs: list[str]) -> int:
        """Mark some of a ticket's live docs deleted (a later round's doc replaced them)."""
        if not docs:
            return 0
        with self._write() as conn:
            cur = conn.execute(
                f"UPDATE memory_docs SET deleted_at = ? WHERE ticket_id = ? AND deleted_at IS NULL AND doc IN"
                f" ({','.join('?' * len(docs))})", (utc_now(), ticket_id, *docs))
            return cur.rowcount


def _round_of(conn: Any, run_id: str) -> int:
    row = conn.execute("SELECT data FROM run_events WHERE run_id = ? AND kind = ? ORDER BY id LIMIT 1",
                       (run_id, FEEDBACK)).fetchone()
    return int(json.loads(row["data"]).get("round") or 1) if row else 1


def _with_by(data: dict[str, Any], by: str | None) -> dict[str, Any]:
    return {**data, "by": by[:MAX_BY_CHARS]} if by else data
