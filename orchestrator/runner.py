"""The Python API: run, resume or revert tickets with the services built from a Config."""

from __future__ import annotations

import logging
import os
import threading
import time
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from langchain_core.runnables import RunnableConfig

from orchestrator.agent.middle_agent import MiddleAgent
from orchestrator.config.settings import Config
from orchestrator.errors import MiddleError, ModelAccessError, RunInterrupted, StoreUnavailable, TicketError
from orchestrator.graph import Limits, TicketContext, build_graph
from orchestrator.running.checkpoints import open_checkpointer
from orchestrator.graph.state import ENDING_NODES, EVENT_FIELDS
from orchestrator.running.lifecycle import RUNNABLE, RunLifecycle, start_refusal
from orchestrator.memory.facade import MemoryFacade
from orchestrator.running.next_steps import advice, advise
from orchestrator.running.outcome import RunOutcome  # noqa: F401 - re-exported (the Python API)
from orchestrator.services import Services
from orchestrator.coding_agent.base import EventCallback
from tickets.claims import owner_died
from orchestrator.running.sync import sync
from tickets.source import LoadResult
from tickets.store import TicketStore

log = logging.getLogger("middle.runner")

__all__ = ["Orchestrator", "RunOutcome", "RUNNABLE"]


class Orchestrator:
    """Runs tickets through the graph with the services of one config.

    Pass `services` to share them (the CLI and the server do), or the same overrides `Services`
    takes (`llm` = an AgentLLM or any LangChain BaseChatModel, `worker`, `registry`,
    `memory_llm`, `worker_env`, `fake`). Use as a context manager; it closes what it built.
    """

    def __init__(
        self,
        config: Config,
        *,
        services: Services | None = None,
        say: Callable[[str], None] | None = None,
        on_event: EventCallback | None = None,
        lease_s: float | None = None,
        stop: threading.Event | None = None,
        project_override: str | None = None,
        **overrides: Any,
    ):
        self.config = config
        self._own_services = services is None
        self.services = services or Services(config, **overrides)
        self.say = say or (lambda msg: log.info(msg))
        self.on_event = on_event
        self.lease_s = lease_s or config.run.lease_s
        self.registry = self.services.registry
        # Options first (a bad backend option or permission mode is an error before any file
        # is created or anything paid for), then the store.
        self.memory: MemoryFacade | None = self.services.memory  # validates backend + options now
        self.worker = self.services.worker
        self.store: TicketStore = self.services.store
        self.lifecycle: RunLifecycle = self.services.lifecycle
        self.worktrees = self.services.worktrees
        self.stop = stop or threading.Event()  # set: runs stop between nodes, marked interrupted
        self.project_override = project_override  # `middle worker`: every ticket in its own clone
        self._checkpoints = open_checkpointer(config.checkpoint_target, reconnect_s=config.store.reconnect_s)
        self.graph = build_graph().compile(checkpointer=self._checkpoints.saver)

    @cached_property
    def agent(self) -> MiddleAgent:
        """Built on first use: `resume` of a run that already ended needs no API key to say so."""
        return MiddleAgent(self.services.agent_llm, self.config.agent.max_turns)

    # -- tickets ---------------------------------------------------------------------------
    def sync_tickets(self, folder: str | Path | None = None, *, source: str | None = None) -> LoadResult:
        """Load the ticket source ([tickets], or a Markdown `folder`, or `source` = KIND:ARG) into
        the store (new tickets pending; others updated); see orchestrator.running.sync."""
        return sync(self.store, self.config, source=source, folder=folder, registry=self.registry)

    def _context(self, ticket_id: str, run_id: str) -> TicketContext:
        record = self._recorder(ticket_id, run_id)

        def say(msg: str) -> None:
            record("note", {"text": msg})
            self.say(msg)

        def on_event(event: dict[str, Any]) -> None:
            record("worker", event)
            if self.on_event is not None:
                self.on_event(event)

        return TicketContext(
            store=self.store, agent=self.agent, worker=self.worker, memory=self.memory,
            limits=Limits(self.config.agent.max_turns, self.config.agent.max_cost_usd),
            num_to_retrieve=self.config.memory.num_to_retrieve, hooks=self.registry.hook,
            on_event=on_event, say=say, lifecycle=self.lifecycle, worktrees=self.worktrees,
            dependencies=self.config.run.dependencies, stop=self.stop,
            project_override=self.project_override,
        )

    def _recorder(self, ticket_id: str, run_id: str) -> Callable[[str, dict[str, Any]], None]:
        """Store run events (`middle log --follow`, the API and the dashboard read them)."""
        down_until = [0.0]  # the store was found unreachable: events until then are dropped

        def record(kind: str, data: dict[str, Any]) -> None:
            if time.monotonic() < down_until[0]:
                return  # waiting out each event would stall Claude Code's stream for minutes
            try:
                self.store.add_event(run_id, ticket_id, kind, data)
            except StoreUnavailable as exc:  # the run's next store write says so, and stops it
                down_until[0] = time.monotonic() + self.config.store.reconnect_s
                log.warning("run events of ticket %s are not recorded for now: %s", ticket_id, exc)
            except Exception:  # the event log is for watching; it never stops a run
                log.exception("recording a %s event of run %s failed", kind, run_id)
        return record

    def run_ticket(self, ticket_id: str, *, rerun: bool = False, skip_claimed: bool = False) -> RunOutcome:
        """Start a new run of a ticket, claimed atomically so no other process runs it at once.

        A pending, failed, reverted or discarded ticket starts; a complete or merged one only with
        `rerun=True`, and never while its change is unmerged; a ticket whose dependencies are not
        done waits. A ticket another process holds is refused, or skipped with
        `skip_claimed=True` (what `middle run` does for the pending list, so two runners share a
        backlog).
        """
        ticket = self.store.get_ticket(ticket_id)
        self.agent  # a missing API key is an error before the ticket is claimed, not a failed run
        refusal = start_refusal(self.store, ticket_id, rerun=rerun, dependencies=self.config.run.dependencies)
        project = Path(self.project_override or ticket.project_path)
        if refusal is None and self.worktrees is not None and project.is_dir():
            from orchestrator.workspace.git import toplevel

            toplevel(project)  # not a repository: one clear error, nothing claimed
        if refusal is None:
            allowed = RUNNABLE + (("complete", "merged") if rerun else ())
            run_id = self.store.claim_new_run(ticket_id, allowed, lease_s=self.lease_s)
            if run_id is not None:
                return self._drive(ticket_id, run_id, {"ticket_id": ticket_id, "run_id": run_id})
            refusal = self._why_not_claimed(ticket_id)
        if skip_claimed:
            return RunOutcome(ticket_id, "", "skipped", refusal)
        raise TicketError(refusal)

    def _why_not_claimed(self, ticket_id: str) -> str:
        status = self.store.get_ticket(ticket_id).status.value
        claim = self.store.get_claim(ticket_id)
        if status == "interrupted" or (status == "running" and claim is None):
            return f"ticket {ticket_id!r} has an unfinished run: {advise(self.store, ticket_id, 'run')}"
        if status == "running" and claim is not None and owner_died(claim):
            return (f"ticket {ticket_id!r} (run {claim.run_id}, pid {claim.pid} on this machine): "
                    f"{advise(self.store, ticket_id, 'run')}")
        if claim is not None:
            return (f"ticket {ticket_id!r} is being worked by {claim.describe()}: "
                    f"{advise(self.store, ticket_id, 'run')}")
        return f"ticket {ticket_id!r} is {status}: {advise(self.store, ticket_id, 'run')}"

    def resume(self, ticket_id: str) -> RunOutcome:
        """Continue the ticket's latest run from its last checkpoint (a completed turn never re-runs).

        An interrupted run, and a failed one whose failure can be retried (a Claude Code turn or
        the model failed), continue; a run that ended as the agent decided (complete, or failed
        on a limit) cannot.
        """
        run = self.store.latest_run(ticket_id)
        if run is None:
            self.store.get_ticket(ticket_id)  # a clear error for an unknown id
            raise TicketError(f"ticket {ticket_id!r} has never run: {advise(self.store, ticket_id, 'resume')}")
        snapshot = self._checkpointed(lambda: self.graph.get_state(_thread(run["id"])))
        if not snapshot.next and snapshot.created_at is None and run["status"] in ("running", "interrupted"):
            # The runner died before the graph's first checkpoint: nothing of this run was done,
            # so it starts over from its input, under the same run.
            self.agent
            self.store.claim_for_resume(ticket_id, run["id"], lease_s=self.lease_s)
            self._stop_leftovers(run["id"])
            return self._drive(ticket_id, run["id"], {"ticket_id": ticket_id, "run_id": run["id"]})
        if not snapshot.next and not snapshot.tasks:
            # (A step whose node's writes were saved but not the checkpoint after it, as a store
            # outage can leave, has tasks and no `next`: it continues from those writes.)
            raise TicketError(
                f"the last run of ticket {ticket_id!r} already ended ({run['status']}"
                f"{': ' + run['reason'] if run.get('reason') else ''}); "
                f"{advise(self.store, ticket_id, 'resume')}")
        self.agent  # as in run_ticket: a model that cannot be built fails before the claim
        self.store.claim_for_resume(ticket_id, run["id"], lease_s=self.lease_s)
        self._stop_leftovers(run["id"])
        return self._drive(ticket_id, run["id"], None)

    def _stop_leftovers(self, run_id: str) -> None:
        """Kill the Claude Code processes a dead `middle` of this run left here, before a turn
        starts in the same worktree (taken over, so no live runner owns them)."""
        from orchestrator.coding_agent.orphans import stop_dead_run

        if n := stop_dead_run(self.store, run_id):
            self.say(f"stopped {n} process(es) the run's previous `middle` left running")

    def _drive(self, ticket_id: str, run_id: str, graph_input: dict[str, Any] | None) -> RunOutcome:
        """Run the graph under the claim; every way out ends the run through the lifecycle."""
        cfg = _thread(run_id)
        heartbeat = _Heartbeat(self.store, ticket_id, run_id, self.lease_s)
        if self.services.fake:  # the fake model's costs are made up: kept apart from real spending
            self.store.set_run_fields(run_id, offline=1)
        self._recorder(ticket_id, run_id)("run_start", {"resume": graph_input is None})
        try:
            with heartbeat:
                self._checkpointed(lambda: self._stream(graph_input, cfg, ticket_id, run_id))
        except StoreUnavailable as exc:
            # The shared store went away mid-run (a restart): nothing is wrong with the ticket,
            # so it is interrupted, and any worker continues it once the store is back.
            reason = (f"the run stopped because the store was out of reach: {exc}; "
                      f"{advice('interrupted', ticket_id, fake=self.services.fake)}")
            self._interrupt_when_reachable(ticket_id, run_id, reason)
            return RunOutcome(ticket_id, run_id, "interrupted", reason, self._turns(run_id),
                              self.store.total_cost(run_id), resumable=True)
        except ModelAccessError as exc:
            # Nothing this run did can be kept when no turn finished: back to the backlog, so one
            # `middle run` picks it up once the key or network is fixed.
            untouched = graph_input is not None and not any(
                t["status"] == "done" for t in self.store.list_turns(run_id=run_id))
            self.lifecycle.fail(ticket_id, run_id, str(exc), resumable=not untouched,
                                ticket_status="pending" if untouched else None)
            raise
        except MiddleError as exc:
            # The checkpoint stays before the failed node, so `middle resume` retries from there.
            reason = str(exc)
            self.lifecycle.fail(ticket_id, run_id, reason, resumable=True)
            return RunOutcome(ticket_id, run_id, "failed", reason, self._turns(run_id),
                              self.store.total_cost(run_id), resumable=True)
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (RunInterrupted), a stop()
            why = exc.why if isinstance(exc, RunInterrupted) else "interrupted by the user"
            self.lifecycle.interrupt(ticket_id, run_id, f"{why}: {advice('interrupted', ticket_id, fake=self.services.fake)}",
                                     auto_resume=self.project_override is not None)  # a worker's
            raise
        except BaseException as exc:  # a bug: still end the run, so no claim or 'running' is left
            self.lifecycle.fail(ticket_id, run_id, f"internal error: {type(exc).__name__}: {exc}; "
                                f"{advice('failed-resumable', ticket_id, fake=self.services.fake)}", resumable=True)
            raise
        state = self._checkpointed(lambda: self.graph.get_state(cfg)).values
        return RunOutcome(ticket_id, run_id, state.get("status", "failed"), state.get("reason", ""),
                          state.get("turn", 0), self.store.total_cost(run_id), commit=state.get("commit"),
                          changes=len(state.get("changes") or []))

    def _stream(self, graph_input: dict[str, Any] | None, cfg: RunnableConfig, ticket_id: str,
                run_id: str) -> None:
        record = self._recorder(ticket_id, run_id)
        # (langgraph types `context` as None on this overload whatever the graph's context schema)
        for task in self.graph.stream(graph_input, cfg, context=self._context(ticket_id, run_id),  # type: ignore[call-overload]
                                      stream_mode="tasks", durability="sync"):
            log.debug("graph task %s", task.get("name"))
            if self.stop.is_set():
                raise RunInterrupted("stopped")
            if "input" in task:  # a node starts
                record("node", {"node": task["name"], "phase": "start"})
                continue
            if task["name"] in ENDING_NODES and not task.get("error"):
                continue  # its run_end event, written with the run's end, is the last one
            result = task.get("result") or {}
            data = {"node": task["name"], "phase": "end",
                    **{k: result[k] for k in EVENT_FIELDS if k in result}}
            if task.get("error"):
                data["error"] = str(task["error"])
            record("decision" if "decision" in result else "node", data)

    def _interrupt_when_reachable(self, ticket_id: str, run_id: str, reason: str) -> None:
        """Mark the run interrupted (auto-resumed), waiting for the store that just went away.
        Stopped meanwhile, it stays `running`: once its lease runs out any runner resumes it."""
        from tickets.claims import this_host

        while True:
            try:
                claim = self.store.get_claim(ticket_id)
                if claim is not None and (claim.host, claim.pid) != (this_host(), os.getpid()):
                    return  # the outage outlasted the lease and another runner took the run over
                self.lifecycle.interrupt(ticket_id, run_id, reason, auto_resume=True)
                return
            except StoreUnavailable as exc:  # each try waits [store] reconnect_s
                if self.stop.is_set():
                    return
                log.warning("ticket %s: waiting for the store to mark its run interrupted (%s)", ticket_id, exc)

    def _checkpointed(self, fn: Callable[[], Any]) -> Any:
        """Run fn; a database error of the checkpoint store becomes one clear StoreError."""
        try:
            return fn()
        except Exception as exc:
            error = self._checkpoints.error(exc)
            if error is None:
                raise
            raise error from None

    def _turns(self, run_id: str) -> int:
        return len(self.store.list_turns(run_id=run_id))

    def run_many(self, ticket_ids: list[str], *, parallel: int | None = None, rerun: bool = False) -> Any:
        """Run tickets N at once (default `[run] parallel`), dependencies first; a BatchResult."""
        from orchestrator.running.batch import run_batch

        return run_batch(self, ticket_ids, parallel=parallel, rerun=rerun)

    def diff(self, ticket_id: str) -> dict[str, Any]:
        """The ticket's change against the commit it started from (files and the patch text)."""
        return self.services.review.diff(ticket_id)

    def merge(self, ticket_id: str) -> Any:
        """Merge a complete ticket's branch into the base branch (a ReviewResult; on a conflict
        nothing changed and its status is "conflict")."""
        return self.services.review.merge(ticket_id)

    def discard(self, ticket_id: str) -> Any:
        """Remove an unmerged ticket's worktree, branch and memory doc."""
        return self.services.review.discard(ticket_id)

    def revert(self, ticket_id: str) -> Any:
        """Undo a ticket: a revert commit for a merged one, else discard; its memory doc deleted."""
        return self.services.review.revert(ticket_id)

    def close(self) -> None:
        self._checkpoints.close()
        if self._own_services:
            self.services.close()

    def __enter__(self) -> "Orchestrator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()




class _Heartbeat:
    """Refreshes the run's claim lease in the background while the run goes on."""

    def __init__(self, store: TicketStore, ticket_id: str, run_id: str, lease_s: float):
        self.store, self.ticket_id, self.run_id, self.lease_s = store, ticket_id, run_id, lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{ticket_id}", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                if not self.store.refresh_claim(self.ticket_id, self.run_id, self.lease_s):
                    if self.store.get_run(self.run_id)["status"] == "running":
                        log.warning("the claim on ticket %s was taken over by another process", self.ticket_id)
                    return
            except StoreUnavailable as exc:  # the run itself stops on it; retried at the next beat
                log.warning("refreshing the claim on ticket %s failed: %s", self.ticket_id, exc)
            except Exception:  # a busy database now is retried at the next beat
                log.exception("refreshing the claim on ticket %s failed", self.ticket_id)

    def __enter__(self) -> "_Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _thread(run_id: str) -> RunnableConfig:
    """The LangGraph config of a run: its id is the checkpointer's thread id."""
    return {"configurable": {"thread_id": run_id}}

