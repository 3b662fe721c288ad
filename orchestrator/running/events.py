"""The events of one run, recorded in the ticket store so `middle log --follow`, the API and the
board can show it live and afterwards: nothing recorded is lost to a store outage or a kill -9.

- While the store is out of reach, events wait in this process, in order, and are written when it
  is back (at the next event, or before the run's end). The wait is bounded (MAX_PENDING events):
  past it the oldest progress events of Claude Code go first, and a note says how many.
- A node's end event is written after LangGraph saved its checkpoint, so a kill -9 in between
  loses it; the node does not run again on resume. `replay_missing` writes, on resume, the end
  event of every finished step the record lacks, from the checkpoint history (the step's task id
  is in each node event).
- Recording never stops a run: an event the store refuses for any other reason is logged.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Iterable

from orchestrator.errors import ClaimLost, StoreUnavailable
from orchestrator.graph.state import ENDING_NODES, EVENT_FIELDS
from orchestrator.killpoints import point
from tickets.model import utc_now

if TYPE_CHECKING:
    from tickets.store import TicketStore

log = logging.getLogger("middle.events")

MAX_PENDING = 5000  # events kept while the store is out (a long Claude Code turn streams ~1,000)
PROGRESS = "coding_agent"  # Claude Code's stream: dropped first when the bound is hit


class EventRecorder:
    """Stores the events of one run, in order; waits out a store outage in memory."""

    def __init__(self, store: TicketStore, ticket_id: str, run_id: str, reconnect_s: float,
                 max_pending: int = MAX_PENDING, *, token: int | None = None,
                 on_refused: Callable[[str], None] | None = None):
        self.store, self.ticket_id, self.run_id, self.reconnect_s = store, ticket_id, run_id, reconnect_s
        # The claim's fencing token: once another runner holds the run, the store refuses these
        # events (ClaimLost); they are dropped and `on_refused` told (the run stops).
        self.token, self.on_refused = token, on_refused
        self.max_pending = max_pending
        self._pending: deque[tuple[str, dict[str, Any], str]] = deque()
        self._dropped = 0  # events let go because the wait was full (said in a note once written)
        self._down_until = 0.0  # the store was found out of reach: no new try before then

    # -- recording ----------------------------------------------------------------------------
    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        self._pending.append((kind, data, utc_now()))
        if len(self._pending) > self.max_pending:
            self._let_go_one()
        self.flush()

    def flush(self, *, wait: bool = False) -> bool:
        """Write the events waiting here, oldest first; True when none is left. Without `wait`,
        a store found out of reach is not tried again for [store] reconnect_s (each try waits
        that long, which would stall Claude Code's stream)."""
        if not wait and time.monotonic() < self._down_until:
            return not self._pending
        if self._dropped:
            self._pending.appendleft(("note", {"text": self._dropped_note()}, utc_now()))
            self._dropped = 0
        was = len(self._pending)
        while self._pending:
            kind, data, at = self._pending[0]
            try:
                self.store.add_event(self.run_id, self.ticket_id, kind, data, at=at, token=self.token)
            except ClaimLost as exc:  # not this process's run any more: nothing more of it is written
                if self.on_refused is not None:
                    self.on_refused(str(exc))
                if self.token is None:  # refused by this process's own end of the run, stored meanwhile:
                    continue  # written again as the ended run's (unfenced, as its later events are)
                self._pending.clear()
                return True
            except StoreUnavailable as exc:
                if not self._down_until:
                    log.warning("the store is out of reach: run events of ticket %s wait here until it is "
                                "back (%s)", self.ticket_id, exc)
                self._down_until = time.monotonic() + self.reconnect_s
                return False
            except Exception:  # the event log is for watching; it never stops a run
                log.exception("recording a %s event of run %s failed", kind, self.run_id)
            self._pending.popleft()
            point("event.written")
        if self._down_until:
            log.warning("the store is back: %d run event(s) of ticket %s that waited were written",
                        was, self.ticket_id)
            self._down_until = 0.0
        return True

    def close(self) -> None:
        """The run is over here: a last try; what cannot be written is said, not hidden."""
        if not self.flush(wait=True) and self._pending:
            log.warning("%d run event(s) of ticket %s could not be written: the store was out of reach "
                        "until this process stopped", len(self._pending), self.ticket_id)

    def _let_go_one(self) -> None:
        """The wait is full: drop the oldest Claude Code progress event (else the oldest)."""
        for i, (kind, _data, _at) in enumerate(self._pending):
            if kind == PROGRESS:
                del self._pending[i]
                break
        else:
            self._pending.popleft()
        self._dropped += 1

    def _dropped_note(self) -> str:
        return (f"{self._dropped} run event(s) (Claude Code's progress first) were not recorded: the store "
                f"was out of reach and at most {self.max_pending} wait for it")

    # -- the run's events ---------------------------------------------------------------------
    def run_start(self, *, resume: bool, fake: bool, **extra: Any) -> None:
        """The run's first event; a run on the fake model is marked offline (its costs are made up)."""
        if fake:
            self.store.set_run_fields(self.run_id, offline=1, token=self.token)
        self("run_start", {"resume": resume, **extra})

    def node_started(self, name: str, task: str | None = None) -> None:
        self("node", {"node": name, "phase": "start", **({"task": task} if task else {})})

    def node_ended(self, name: str, result: Any, error: BaseException | None = None, *,
                   task: str | None = None, replayed: bool = False) -> None:
        """A node's end: a `decision` event when it decided, else `node` (with its error, if any)."""
        if name in ENDING_NODES and error is None:
            return  # its run_end event, written with the run's end, is the last one
        result = result if isinstance(result, dict) else {}
        data = {"node": name, "phase": "end", **{k: result[k] for k in EVENT_FIELDS if k in result}}
        if task:
            data["task"] = task
        if replayed:
            data["replayed"] = True  # written on resume: the first process died before recording it
        if error is not None:
            data["error"] = str(error)
        self("decision" if "decision" in result else "node", data)

    def replay_missing(self, steps: Iterable[tuple[str, str, Any]]) -> int:
        """On resume: record the end of each finished step (task id, node name, its writes; from
        the checkpoint history, oldest first) that has no end event yet; how many."""
        recorded = {e["data"].get("task") for e in self.store.list_events(run_id=self.run_id, limit=1_000_000)
                    if e["data"].get("phase") == "end" and e["kind"] in ("node", "decision")}
        replayed = 0
        for task, name, result in steps:
            if task in recorded or name.startswith("__") or name in ENDING_NODES:
                continue
            self.node_ended(name, result, task=task, replayed=True)
            replayed += 1
        return replayed


def finished_steps(graph: Any, cfg: Any) -> list[tuple[str, str, Any]]:
    """The run's finished steps from its checkpoint history, oldest first: (task id, node, writes)."""
    steps = []
    for snapshot in reversed(list(graph.get_state_history(cfg))):
        for task in snapshot.tasks:
            if task.result is not None and task.error is None:
                steps.append((task.id, task.name, task.result))
    return steps


__all__ = ["EventRecorder", "MAX_PENDING", "finished_steps"]
