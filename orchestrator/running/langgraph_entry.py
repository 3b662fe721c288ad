"""`langgraph.json`'s entry: the ticket graph bound to the configured project's services, for LangGraph Server.

`langgraph dev` (or LangGraph Server) calls `make_graph(config)`. It reads the project's
`middle.toml` (MIDDLE_CONFIG, else the working directory's), builds the services once per
process, and returns the same graph `build_graph()` describes, compiled without a checkpointer
(the server brings its own). LangGraph Server can only pass JSON as run context, so each node gets
the services (store, middle agent, coding agent, memory) through a closure instead of the runtime
context. Input: `{"ticket_id": "..."}`. A run started there claims the ticket in the store like
`middle run` does (`orchestrator.lifecycle.run_lifecycle`), records the same run events with the driver's
recorder (`orchestrator.running.events`; the dashboard and `middle log --follow` show them), and ends a run
that raised as the runner does
(`orchestrator.running.policy`), releasing the claim. Set `configurable.fake = true` to run on the offline fake model.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any, Callable

from langgraph.errors import GraphBubbleUp
from langgraph.graph import StateGraph
from langgraph.runtime import Runtime

from orchestrator.errors import TicketError
from orchestrator.graph.builder import build_graph
from orchestrator.graph.context import TicketContext
from orchestrator.graph.state import TicketState
from orchestrator.lifecycle.run_lifecycle import try_claim
from orchestrator.running.driver import ticket_context
from orchestrator.running.events import EventRecorder
from orchestrator.running.policy import end_on_exception

# No heartbeat refreshes a claim taken here, so the lease is long; a claim still dies with the
# server process (claims are checked against the process on this host).
LEASE_S = 6 * 3600.0
_SERVICES: dict[tuple[str, bool], Any] = {}
_LOCK = threading.Lock()


class BoundServices:
    """Builds the services and the middle agent on first use and makes a TicketContext per run.

    `services`: share services already built (tests, an embedding application) instead of
    building them from `config`."""

    def __init__(self, fake: bool = False, config: Any = None, services: Any = None):
        self.fake, self._config, self._services = fake, config, services
        self._parts: tuple[Any, Any] | None = None

    def parts(self) -> tuple[Any, Any]:
        with _LOCK:
            if self._parts is None:
                from orchestrator.agent.middle_agent import MiddleAgent
                from orchestrator.config.settings import load_config
                from orchestrator.services import Services

                services = self._services or Services(self._config or load_config(), fake=self.fake)
                self._parts = (services, MiddleAgent(services.agent_llm, services.config.agent.max_turns))
            return self._parts

    def recorder(self, ticket_id: str, run_id: str) -> EventRecorder:
        services = self.parts()[0]
        return EventRecorder(services.store, ticket_id, run_id, services.config.store.reconnect_s)

    def context(self, record: EventRecorder) -> TicketContext:
        services, agent = self.parts()
        return ticket_context(services, services.config, agent, record)

    def claim(self, ticket_id: str) -> str:
        """Claim a new run as `middle run --rerun` does (the same refusals), and record its start."""
        services = self.parts()[0]
        store, cfg = services.store, services.config
        # The ticket source is the source of truth, as for `middle run`.
        from orchestrator.running.sync import sync

        sync(store, cfg, registry=services.registry)
        claimed, refusal = try_claim(store, ticket_id, rerun=True, dependencies=cfg.run.dependencies, lease_s=LEASE_S)
        if claimed is None:
            raise TicketError(refusal)
        run_id = claimed.run_id
        self.recorder(ticket_id, run_id).run_start(resume=False, fake=self.fake, via="langgraph")
        return run_id

    def end(self, state: dict[str, Any], exc: BaseException) -> None:
        """A node raised: end the run as the runner would (the one policy), claim released."""
        end_on_exception(
            exc, self.parts()[0].lifecycle, state["ticket_id"], state["run_id"], fresh=True, fake=self.fake
        )


def _bind(fn: Callable[..., Any], bound: BoundServices, name: str) -> Callable[[dict[str, Any]], Any]:
    """The node (or router) `fn` called with a Runtime holding this project's services."""

    def node(state: dict[str, Any]) -> Any:
        update: dict[str, Any] = {}
        if name == "load_ticket" and not state.get("run_id"):
            update["run_id"] = bound.claim(state["ticket_id"])
            state = {**state, **update}
        is_node = name != "route"
        record = bound.recorder(state["ticket_id"], state["run_id"])
        if is_node:
            record.node_started(name)
        try:
            result = fn(state, Runtime(context=bound.context(record)))
        except GraphBubbleUp:  # LangGraph's own control flow (an interrupt), not an end of the run
            record.close()
            raise
        except BaseException as exc:
            # The graph stops here whatever the exception: LangGraph Server shows the error, and
            # the store says how the run ended, as for `middle run`.
            if is_node and isinstance(exc, Exception):  # an interruption is no node's error
                record.node_ended(name, None, exc)
            record.close()  # the node's events before the run's end
            bound.end(state, exc)
            raise
        if is_node:
            record.node_ended(name, result)
        record.close()  # this recorder lives for one node: what waits for the store is written now
        return {**result, **update} if isinstance(result, dict) else result

    # Not functools.wraps: LangGraph would read fn's signature and pass a runtime itself.
    node.__name__ = node.__qualname__ = fn.__name__
    node.__doc__ = fn.__doc__
    return node


def bind_services(builder: StateGraph[Any, Any, Any, Any], bound: BoundServices) -> StateGraph[Any, Any, Any, Any]:
    """A copy of `builder` (same nodes, edges and branches) whose nodes use `bound`'s services."""
    graph = StateGraph(TicketState)
    for name, spec in builder.nodes.items():
        node = getattr(spec.runnable, "func")  # noqa: B009 - (typed as a union of node kinds)
        graph.add_node(name, _bind(node, bound, name))  # type: ignore[call-overload]
    for start, end in builder.edges:
        graph.add_edge(start, end)
    for start, branches in builder.branches.items():
        for branch in branches.values():
            ends = list(branch.ends.values()) if branch.ends else None
            route = getattr(branch.path, "func")  # noqa: B009 - (typed as a Runnable)
            graph.add_conditional_edges(start, _bind(route, bound, "route"), ends)
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
