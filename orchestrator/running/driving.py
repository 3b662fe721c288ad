"""What both drivers of the ticket graph share: the claim, the run's context and its events.

The runner (`middle run`, `middle serve`, the Python API) and the LangGraph Server entry start a
run here, record the same events (`middle log --follow`, the API and the dashboard read them) and
end it on an exception through `orchestrator.running.policy`.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from orchestrator.errors import StoreUnavailable
from orchestrator.graph.context import Limits, TicketContext
from orchestrator.graph.state import ENDING_NODES, EVENT_FIELDS
from orchestrator.lifecycle.runs import RUNNABLE, start_refusal
from orchestrator.lifecycle.next_steps import advise
from tickets.claims import owner_died

log = logging.getLogger("middle.driving")


def try_claim(store: Any, ticket_id: str, *, rerun: bool, dependencies: str, lease_s: float,
              before_claim: Callable[[], None] | None = None) -> tuple[str | None, str]:
    """Claim a new run of the ticket atomically: (run id, "") or (None, why not and what to do).

    `before_claim` runs once the ticket may start, before anything is claimed (a check whose
    error must leave no run behind)."""
    refusal = start_refusal(store, ticket_id, rerun=rerun, dependencies=dependencies)
    if refusal is None:
        if before_claim is not None:
            before_claim()
        allowed = RUNNABLE + (("complete", "merged") if rerun else ())
        run_id = store.claim_new_run(ticket_id, allowed, lease_s=lease_s)
        if run_id is not None:
            return run_id, ""
        refusal = why_not_claimed(store, ticket_id)
    return None, refusal


def why_not_claimed(store: Any, ticket_id: str) -> str:
    """Why the claim of a ticket that may start was refused (another process, an unfinished run)."""
    status = store.get_ticket(ticket_id).status.value
    claim = store.get_claim(ticket_id)
    if status == "interrupted" or (status == "running" and claim is None):
        return f"ticket {ticket_id!r} has an unfinished run: {advise(store, ticket_id, 'run')}"
    if status == "running" and claim is not None and owner_died(claim):
        return (f"ticket {ticket_id!r} (run {claim.run_id}, pid {claim.pid} on this machine): "
                f"{advise(store, ticket_id, 'run')}")
    if claim is not None:
        return f"ticket {ticket_id!r} is being worked by {claim.describe()}: {advise(store, ticket_id, 'run')}"
    return f"ticket {ticket_id!r} is {status}: {advise(store, ticket_id, 'run')}"


class EventRecorder:
    """Stores the events of one run; recording never stops the run."""

    def __init__(self, store: Any, ticket_id: str, run_id: str, reconnect_s: float):
        self.store, self.ticket_id, self.run_id, self.reconnect_s = store, ticket_id, run_id, reconnect_s
        self._down_until = 0.0  # the store was found unreachable: events until then are dropped

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if time.monotonic() < self._down_until:
            return  # waiting out each event would stall Claude Code's stream for minutes
        try:
            self.store.add_event(self.run_id, self.ticket_id, kind, data)
        except StoreUnavailable as exc:  # the run's next store write says so, and stops it
            self._down_until = time.monotonic() + self.reconnect_s
            log.warning("run events of ticket %s are not recorded for now: %s", self.ticket_id, exc)
        except Exception:  # the event log is for watching; it never stops a run
            log.exception("recording a %s event of run %s failed", kind, self.run_id)

    def run_start(self, *, resume: bool, fake: bool, **extra: Any) -> None:
        """The run's first event; a run on the fake model is marked offline (its costs are made up)."""
        if fake:
            self.store.set_run_fields(self.run_id, offline=1)
        self("run_start", {"resume": resume, **extra})

    def node_started(self, name: str) -> None:
        self("node", {"node": name, "phase": "start"})

    def node_ended(self, name: str, result: Any, error: BaseException | None = None) -> None:
        """A node's end: a `decision` event when it decided, else `node` (with its error, if any)."""
        if name in ENDING_NODES and error is None:
            return  # its run_end event, written with the run's end, is the last one
        result = result if isinstance(result, dict) else {}
        data = {"node": name, "phase": "end", **{k: result[k] for k in EVENT_FIELDS if k in result}}
        if error is not None:
            data["error"] = str(error)
        self("decision" if "decision" in result else "node", data)


def ticket_context(services: Any, config: Any, agent: Any, record: EventRecorder, *,
                   say: Callable[[str], None] | None = None, on_event: Callable[[dict[str, Any]], None] | None = None,
                   stop: Any = None, project_override: str | None = None) -> TicketContext:
    """The services one run's nodes use; its notes and Claude Code's events are recorded, then
    passed to `say` / `on_event` when given."""
    cfg = config

    def noted(msg: str) -> None:
        record("note", {"text": msg})
        if say is not None:
            say(msg)

    def seen(event: dict[str, Any]) -> None:
        record("worker", event)
        if on_event is not None:
            on_event(event)

    return TicketContext(
        store=services.store, agent=agent, worker=services.worker, memory=services.memory,
        limits=Limits(cfg.agent.max_turns, cfg.agent.max_cost_usd),
        num_to_retrieve=cfg.memory.num_to_retrieve, hooks=services.registry.hook,
        on_event=seen, say=noted, lifecycle=services.lifecycle, worktrees=services.worktrees,
        dependencies=cfg.run.dependencies, stop=stop, project_override=project_override,
    )
