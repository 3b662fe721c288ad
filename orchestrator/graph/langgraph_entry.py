"""`langgraph.json`'s entry: the ticket graph bound to the configured project's services, for LangGraph Server.

`langgraph dev` (or LangGraph Server) calls `make_graph(config)`. It reads the project's
`middle.toml` (MIDDLE_CONFIG, else the working directory's), builds the services once per
process, and returns the same graph `build_graph()` describes, compiled without a checkpointer
(the server brings its own). LangGraph Server can only pass JSON as run context, so each node gets
the services (store, middle agent, worker, memory) through a closure instead of the runtime
context. Input: `{"ticket_id": "..."}`. A run started there claims the ticket in the store like
`middle run` does, records the same run events (the dashboard and `middle log --follow` show it),
and releases the claim when it ends. Set `configurable.fake = true` to run on the offline fake model.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Any, Callable

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime

from orchestrator.errors import MiddleError, TicketError
from orchestrator.graph.builder import build_graph
from orchestrator.graph.context import Limits, TicketContext
from orchestrator.graph.state import ENDING_NODES, EVENT_FIELDS, TicketState

log = logging.getLogger("middle.langgraph")

# No heartbeat refreshes a claim taken here, so the lease is long; a claim still dies with the
# server process (claims are checked against the process on this host).
LEASE_S = 6 * 3600.0
_SERVICES: dict[tuple[str, bool], Any] = {}
_LOCK = threading.Lock()


class BoundServices:
    """Builds the services and the middle agent on first use and makes a TicketContext per run."""

    def __init__(self, fake: bool = False, config: Any = None):
        self.fake, self._config = fake, config
        self._parts: tuple[Any, Any] | None = None

    def parts(self) -> tuple[Any, Any]:
        with _LOCK:
            if self._parts is None:
                from orchestrator.agent.middle_agent import MiddleAgent
                from orchestrator.config.settings import load_config
                from orchestrator.services import Services

                cfg = self._config or load_config()
                services = Services(cfg, fake=self.fake)
                self._parts = (services, MiddleAgent(services.agent_llm, cfg.agent.max_turns))
            return self._parts

    def record(self, run_id: str, ticket_id: str, kind: str, data: dict[str, Any]) -> None:
        try:
            self.parts()[0].store.add_event(run_id, ticket_id, kind, data)
        except Exception:  # the event log is for watching; it never stops a run
            log.exception("recording a %s event of run %s failed", kind, run_id)

    def context(self, ticket_id: str, run_id: str) -> TicketContext:
        services, agent = self.parts()
        cfg = services.config
        return TicketContext(
            store=services.store, agent=agent, worker=services.worker, memory=services.memory,
            limits=Limits(cfg.agent.max_turns, cfg.agent.max_cost_usd),
            num_to_retrieve=cfg.memory.num_to_retrieve, hooks=services.registry.hook,
            on_event=lambda event: self.record(run_id, ticket_id, "worker", event),
            say=lambda msg: self.record(run_id, ticket_id, "note", {"text": msg}),
            lifecycle=services.lifecycle, worktrees=services.worktrees,
            dependencies=cfg.run.dependencies)

    def claim(self, ticket_id: str) -> str:
        from orchestrator.running.lifecycle import RUNNABLE, start_refusal

        services = self.parts()[0]
        store, cfg = services.store, services.config
        # The ticket source is the source of truth, as for `middle run`.
        from orchestrator.running.sync import sync

        sync(store, cfg, registry=services.registry)
        refusal = start_refusal(store, ticket_id, rerun=True, dependencies=cfg.run.dependencies)
        if refusal:
            raise TicketError(refusal)
        run_id = store.claim_new_run(ticket_id, RUNNABLE + ("complete", "merged"), lease_s=LEASE_S)
        if run_id is None:
            raise TicketError(f"ticket {ticket_id!r} is {store.get_ticket(ticket_id).status.value} or "
                              "claimed by another run: see `middle tickets`")
        self.record(run_id, ticket_id, "run_start", {"resume": False, "via": "langgraph"})
        return run_id

    def fail(self, state: dict[str, Any], exc: BaseException) -> None:
        """A node raised: end the run through the one owner of run ends (claim released, hook)."""
        lifecycle = self.parts()[0].lifecycle
        if isinstance(exc, KeyboardInterrupt):
            lifecycle.interrupt(state["ticket_id"], state["run_id"], "interrupted")
        else:
            lifecycle.fail(state["ticket_id"], state["run_id"], str(exc), resumable=True)


def _bind(fn: Callable[..., Any], bound: BoundServices, name: str) -> Callable[[dict[str, Any]], Any]:
    """The node (or router) `fn` called with a Runtime holding this project's services."""

    def node(state: dict[str, Any]) -> Any:
        update: dict[str, Any] = {}
        if name == "load_ticket" and not state.get("run_id"):
            update["run_id"] = bound.claim(state["ticket_id"])
            state = {**state, **update}
        is_node = name != "route"
        if is_node:
            bound.record(state["run_id"], state["ticket_id"], "node", {"node": name, "phase": "start"})
        try:
            result = fn(state, Runtime(context=bound.context(state["ticket_id"], state["run_id"])))
        except (MiddleError, KeyboardInterrupt) as exc:
            bound.fail(state, exc)
            raise
        if is_node and name not in ENDING_NODES:  # their run_end event is the run's last
            data = {"node": name, "phase": "end", **{k: result[k] for k in EVENT_FIELDS if k in result}}
            bound.record(state["run_id"], state["ticket_id"], "decision" if "decision" in result else "node", data)
        return {**result, **update} if isinstance(result, dict) else result

    # Not functools.wraps: LangGraph would read fn's signature and pass a runtime itself.
    node.__name__ = node.__qualname__ = fn.__name__
    node.__doc__ = fn.__doc__
    return node


def bind_services(builder: StateGraph[Any, Any, Any, Any], bound: BoundServices) -> StateGraph[Any, Any, Any, Any]:
    """A copy of `builder` (same nodes, edges and branches) whose nodes use `bound`'s services."""
    graph = StateGraph(TicketState)
    for name, spec in builder.nodes.items():
        graph.add_node(name, _bind(getattr(spec.runnable, "func"), bound, name))  # type: ignore[call-overload]
    for start, end in builder.edges:
        graph.add_edge(start, end)
    for start, branches in builder.branches.items():
        for branch in branches.values():
            ends = list(branch.ends.values()) if branch.ends else None
            graph.add_conditional_edges(start, _bind(getattr(branch.path, "func"), bound, "route"), ends)
    return graph


@atexit.register
def _close_all() -> None:
    """Close the services built for LangGraph Server when its process exits."""
    for bound in _SERVICES.values():
        if bound._parts is not None:
            bound._parts[0].close()


def make_graph(config: dict[str, Any] | None = None) -> Any:
    """The factory `langgraph.json` names: the compiled ticket graph for this project."""
    fake = bool(((config or {}).get("configurable") or {}).get("fake"))
    key = (os.environ.get("MIDDLE_CONFIG", os.getcwd()), fake)
    with _LOCK:
        bound = _SERVICES.setdefault(key, BoundServices(fake=fake))
    return bind_services(build_graph(), bound).compile(name="middle-ticket")
