"""`langgraph.json`'s entry: the ticket graph bound to the configured project's services, for LangGraph Server.

`langgraph dev` (or LangGraph Server) calls `make_graph(config)`. It returns the same graph
`build_graph()` describes, compiled without a checkpointer (the server brings its own); the
project's `middle.toml` (MIDDLE_CONFIG, else the server's working directory's) is read and its
services built once per process, on a node's first call. LangGraph Server can only pass JSON as
run context, so each node gets the services (store, middle agent, coding agent, memory) through a
closure instead of the runtime context. Input: `{"ticket_id": "..."}`.

A run started there claims the ticket in the store like `middle run` does
(`orchestrator.lifecycle.run_lifecycle`) and goes through the same typed, fenced run
(`orchestrator.running.run.Run`): its heartbeat keeps the usual lease, so a server that reloads
or dies strands nothing (the claim runs out and a `middle resume` or a worker continues it), its
events are the same run events (the dashboard and `middle log --follow` show them), and a run
that raised ends as the runner ends it (`orchestrator.running.policy`), releasing the claim. Set
`configurable.fake = true` to run on the offline fake model.

LangGraph Server checkpoints into its own store (it replaces a compiled graph's checkpointer
with its own, `langgraph_api.graph.get_graph`), which `middle` cannot read. So every node's
state update is also written to the project's checkpointer (`[store]`'s checkpoints, thread id
= run id, fenced by the run's claim) as that node's step: `middle resume` or a worker continues a
run the server started from its last finished step, as it would a `middle run`'s.
"""

from __future__ import annotations

import atexit
import contextvars
import os
import threading
from typing import Any, Callable

from langgraph.errors import GraphBubbleUp
from langgraph.graph import StateGraph
from langgraph.runtime import Runtime

from orchestrator.errors import TicketError
from orchestrator.graph.builder import build_graph
from orchestrator.graph.context import TicketContext
from orchestrator.graph.state import ENDING_NODES, TicketState
from orchestrator.lifecycle.run_lifecycle import try_claim
from orchestrator.running.checkpoints import Checkpointer, open_checkpointer
from orchestrator.running.driver import thread_config, ticket_context
from orchestrator.running.policy import end_on_exception
from orchestrator.running.run import Run, fence_checkpoints, stop_run_processes

_SERVICES: dict[tuple[str, bool], Any] = {}
_LOCK = threading.Lock()


class BoundServices:
    """Builds the services and the middle agent on first use and makes a TicketContext per run.

    Holds the runs this server process claimed (`Run`, by id): their heartbeat keeps the claim's
    usual lease while the server works them, and stops with the run's ending node. A node of a run
    this process does not hold (the server reloaded, or another process started it) takes the run
    over first, as `middle resume` would; the earlier owner's writes are refused from then on.

    `services`: share services already built (tests, an embedding application) instead of
    building them from `config`."""

    def __init__(self, fake: bool = False, config: Any = None, services: Any = None):
        self.fake, self._config, self._services = fake, config, services
        self._parts: tuple[Any, Any] | None = None
        self._runs: dict[str, Run] = {}
        self._mirror: tuple[Checkpointer, Any] | None = None

    def parts(self) -> tuple[Any, Any]:
        with _LOCK:
            if self._parts is None:
                from orchestrator.agent.middle_agent import MiddleAgent
                from orchestrator.config.settings import load_config
                from orchestrator.services import Services

                services = self._services or Services(self._config or load_config(), fake=self.fake)
                self._parts = (services, MiddleAgent(services.agent_llm, services.config.agent.max_turns))
            return self._parts

    def _mirrored(self) -> tuple[Checkpointer, Any]:
        """The project's checkpointer and the ticket graph compiled with it (opened on first use,
        in a node's worker thread: opening a database is a blocking call)."""
        services = self.parts()[0]
        with _LOCK:
            if self._mirror is None:
                cfg = services.config
                checkpoints = open_checkpointer(cfg.checkpoint_target, reconnect_s=cfg.store.reconnect_s)
                fence_checkpoints(checkpoints.saver, self._runs)  # a taken-over run's steps are refused
                graph = bind_services(build_graph(), self).compile(checkpointer=checkpoints.saver)
                self._mirror = (checkpoints, graph)
            return self._mirror

    def save_step(self, run: Run, node: str, values: dict[str, Any]) -> None:
        """Write the step `node` took (its state update `values`) to the project's checkpointer,
        as the runner's checkpoint after that node; the routes after it are decided again there
        (on the same state) to store the next step."""
        checkpoints, graph = self._mirrored()
        try:
            # In a fresh context: inside a node, LangGraph's context variables hold the server's
            # run (its callbacks and metadata), which update_state would otherwise merge in.
            contextvars.Context().run(graph.update_state, thread_config(run.run_id), values, as_node=node)
        except Exception as exc:
            error = checkpoints.error(exc)  # a database error as one clear StoreError
            if error is None:
                raise
            raise error from None

    def close(self) -> None:
        """Close what was built (when the server process exits)."""
        if self._mirror is not None:
            self._mirror[0].close()
        if self._parts is not None:
            self._parts[0].close()

    def _run(self, ticket_id: str, run_id: str, token: int, *, fresh: bool) -> Run:
        services = self.parts()[0]
        run = Run(services.store, services.lifecycle, ticket_id, run_id, token, lease_s=services.config.run.lease_s,
                  reconnect_s=services.config.store.reconnect_s, fresh=fresh)
        run.on_lost(lambda: stop_run_processes(run))
        run.__enter__()  # its heartbeat beats until the run's ending node (`release`)
        with _LOCK:
            self._runs[run_id] = run
        return run

    def held(self, ticket_id: str, run_id: str) -> Run:
        """This process's Run for `run_id`, taking the run over when it holds none."""
        with _LOCK:
            run = self._runs.get(run_id)
        if run is not None:
            return run
        services = self.parts()[0]
        token = services.store.claim_for_resume(ticket_id, run_id, lease_s=services.config.run.lease_s)
        return self._run(ticket_id, run_id, token, fresh=False)

    def ended(self, run_id: str, node: str) -> dict[str, Any] | None:
        """The state update to return instead of running `node` again, when the run already ended
        and this process does not hold it; None when the node should run. Raises TicketError for a
        node that would reopen a completed run.

        LangGraph Server runs a thread again from its own last checkpoint after it restarts, so a
        kill after a node stored the run's end but before the server's checkpoint runs that node
        again: an ending node would write a second run_end (and claim the run again), any other
        node of a completed run would reopen it. As `middle resume` does, a run ended by its ending
        node stays ended; a failed run's earlier node still continues it (that is a resume)."""
        with _LOCK:
            if run_id in self._runs:
                return None
        store = self.parts()[0].store
        run = store.get_run(run_id)
        if run["status"] not in ("complete", "failed") or store.run_end_data(run_id) is None:
            return None
        if node in ENDING_NODES:
            return {"status": run["status"], "reason": run["reason"] or ""}
        if run["status"] == "complete":
            raise TicketError(f"run {run_id} of ticket {run['ticket_id']!r} already completed; start a "
                              "new run (a new thread) to work the ticket again")
        return None

    def release(self, run_id: str) -> None:
        """The run ended (or raised out of the graph): stop its heartbeat, flush its events."""
        with _LOCK:
            run = self._runs.pop(run_id, None)
        if run is not None:
            run.close()

    def context(self, run: Run) -> TicketContext:
        services, agent = self.parts()
        return ticket_context(services, services.config, agent, run)

    def claim(self, ticket_id: str) -> str:
        """Claim a new run as `middle run --rerun` does (the same refusals), and record its start."""
        services = self.parts()[0]
        store, cfg = services.store, services.config
        # The ticket source is the source of truth, as for `middle run`.
        from orchestrator.running.sync import sync

        sync(store, cfg, registry=services.registry)
        claimed, refusal = try_claim(store, ticket_id, rerun=True, dependencies=cfg.run.dependencies,
                                     lease_s=cfg.run.lease_s)
        if claimed is None:
            raise TicketError(refusal)
        claim = store.claim_of_run(claimed.run_id)
        run = self._run(ticket_id, claimed.run_id, claim.token if claim else -1, fresh=True)
        run.events.run_start(resume=False, fake=self.fake, via="langgraph")
        return run.run_id

    def end(self, run: Run, exc: BaseException) -> None:
        """A node raised: end the run as the runner would (the one policy), claim released. (A
        route that raised while a step was saved ended it already: it is not ended twice.)"""
        if not run.ended:
            end_on_exception(exc, run, fake=self.fake)
        self.release(run.run_id)


def _bind(fn: Callable[..., Any], bound: BoundServices, name: str) -> Callable[[dict[str, Any]], Any]:
    """The node (or router) `fn` called with a Runtime holding this project's services."""

    def node(state: dict[str, Any]) -> Any:
        update: dict[str, Any] = {}
        if name == "load_ticket" and not state.get("run_id"):
            update["run_id"] = bound.claim(state["ticket_id"])
            state = {**state, **update}
        is_node = name != "route"
        if is_node:
            stored_end = bound.ended(state["run_id"], name)
            if stored_end is not None:
                return stored_end  # the run's end is stored already: not written twice
        run = bound.held(state["ticket_id"], state["run_id"])
        record = run.events
        try:
            run.guard()  # taken over meanwhile (or its lease could not be renewed): no further step
            if is_node:
                record.node_started(name)
            result = fn(state, Runtime(context=bound.context(run)))
            if is_node:  # its step in the project's checkpoints before its end event: once the node
                # returned, a resume never runs it again (a kill in between loses only that event)
                bound.save_step(run, name, {**state, **result} if name == "load_ticket" else result)
        except GraphBubbleUp:  # LangGraph's own control flow (an interrupt), not an end of the run
            record.flush(wait=True)
            raise
        except BaseException as exc:
            # The graph stops here whatever the exception: LangGraph Server shows the error, and
            # the store says how the run ended, as for `middle run`.
            if is_node and isinstance(exc, Exception):  # an interruption is no node's error
                record.node_ended(name, None, exc)
            bound.end(run, exc)
            raise
        if is_node:
            record.node_ended(name, result)
        if name in ENDING_NODES:
            bound.release(run.run_id)
        else:
            record.flush(wait=True)  # the node's events are in the store before the server's checkpoint
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
        bound.close()


def make_graph(config: dict[str, Any] | None = None) -> Any:
    """The factory `langgraph.json` names: the compiled ticket graph for this project."""
    fake = bool(((config or {}).get("configurable") or {}).get("fake"))
    # No blocking call here: LangGraph Server builds the graph on its event loop (and refuses
    # `os.getcwd()` there); the config is found on first use, in a node's worker thread.
    key = (os.environ.get("MIDDLE_CONFIG", ""), fake)
    with _LOCK:
        bound = _SERVICES.setdefault(key, BoundServices(fake=fake))
    return bind_services(build_graph(), bound).compile(name="middle-ticket")
