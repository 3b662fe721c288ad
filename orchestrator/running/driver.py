"""The one driver of the ticket graph: claim a run, drive the graph under the claim, record its
events, and end it through the one policy whatever stops it.

`Orchestrator` (the Python API, `middle run`, `middle serve`, a `middle worker`) is this driver with
the review and sync verbs on top; a batch (orchestrator/running/batch.py) runs one driver per
ticket. The LangGraph Server entry (running/langgraph_entry.py) cannot own the loop (the server
streams the graph), so it uses this module's recorder and context and the same claim and policy.
"""

from __future__ import annotations

import logging
import threading
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from langchain_core.runnables import RunnableConfig

from orchestrator.agent.middle_agent import MiddleAgent
from orchestrator.coding_agent.base import EventCallback, title_of
from orchestrator.config.settings import Config
from orchestrator.doctor import local_note_once
from orchestrator.errors import RunInterrupted, TicketError
from orchestrator.graph import build_graph
from orchestrator.graph.context import Limits, TicketContext
from orchestrator.graph.state import ENDING_NODES
from orchestrator.lifecycle.next_steps import advise
from orchestrator.lifecycle.run_lifecycle import ClaimedRun, RunLifecycle, try_claim
from orchestrator.memory.facade import MemoryFacade
from orchestrator.procs.orphans import running
from orchestrator.running.checkpoints import open_checkpointer
from orchestrator.running.events import finished_steps
from orchestrator.running.outcome import RunOutcome
from orchestrator.running.policy import end_on_exception
from orchestrator.running.refresh import current_ticket, resumed_checks
from orchestrator.running.run import Run, fence_checkpoints, stop_run_processes
from orchestrator.services import Services
from tickets.pull_signals import PullAsks
from tickets.store import TicketStore

log = logging.getLogger("middle.driver")

__all__ = ["TicketDriver", "WorkLeft", "thread_config", "ticket_context"]


class WorkLeft(TicketError):
    """`middle run ID` of a ticket whose earlier run left work, without --fresh: refused."""


class TicketDriver:
    """Runs tickets through the graph with the services of one config, one claimed run at a time.

    Pass `services` to share them (the CLI and the server do), or the same overrides `Services`
    takes (`llm` = an AgentLLM or any LangChain BaseChatModel, `coding_agent`, `registry`,
    `memory_llm`, `coding_agent_env`, `fake`). Use as a context manager; it closes what it built.
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
        started_by: str | None = None,
        **overrides: Any,
    ):
        self.config = config
        # who starts this driver's runs: given by a server (the request's token name), else
        # the person running `middle` (git's user, else the login), asked at the first run
        self.started_by = started_by
        self._own_services = services is None
        self.services = services or Services(config, **overrides)
        self.say = say or (lambda msg: log.info(msg))
        self.on_event = on_event
        self.lease_s = lease_s or config.run.lease_s
        self.registry = self.services.registry
        # Options first (a bad backend option or permission mode is an error before any file
        # is created or anything paid for), then the store.
        self.memory: MemoryFacade | None = self.services.memory  # validates backend + options now
        self.coding_agent = self.services.coding_agent
        self.store: TicketStore = self.services.store
        self.lifecycle: RunLifecycle = self.services.lifecycle
        self.worktrees = self.services.worktrees
        self.stop = stop or threading.Event()  # set: runs stop between nodes, marked interrupted
        self.project_override = project_override  # `middle worker`: every ticket in its own clone
        self._checkpoints = open_checkpointer(config.checkpoint_target, reconnect_s=config.store.reconnect_s,
                                              pool=self.store.pool_for(config.checkpoint_target))
        self._runs: dict[str, Run] = {}  # the run driven now, by id (its checkpoints are fenced)
        fence_checkpoints(self._checkpoints.saver, self._runs)
        self.graph = build_graph().compile(checkpointer=self._checkpoints.saver)

    @cached_property
    def agent(self) -> MiddleAgent:
        """Built on first use: `resume` of a run that already ended needs no API key to say so."""
        return MiddleAgent(self.services.agent_llm, self.config.agent.max_turns)

    def _held(self, claimed: ClaimedRun, token: int | None = None) -> Run:
        """The typed run for a claim this process has just taken."""
        if token is None:
            return Run.held(self.store, self.lifecycle, claimed.ticket_id, claimed.run_id, lease_s=self.lease_s,
                            reconnect_s=self.config.store.reconnect_s, fresh=claimed.fresh)
        return Run(self.store, self.lifecycle, claimed.ticket_id, claimed.run_id, token, lease_s=self.lease_s,
                   reconnect_s=self.config.store.reconnect_s, fresh=claimed.fresh)

    def run_ticket(self, ticket_id: str, *, rerun: bool = False, skip_claimed: bool = False,
                   fresh: bool = False) -> RunOutcome:
        """Start a new run of a ticket, claimed atomically so no other process runs it at once.

        A pending, failed, reverted or discarded ticket starts; a complete or merged one only with
        `rerun=True`, and never while its change is unmerged; a ticket whose dependencies are not
        done waits. A ticket another process holds is refused, or skipped with
        `skip_claimed=True` (what `middle run` does for the pending list, so two runners share a
        backlog). A ticket whose earlier run left work (orchestrator.workspace.leftover) is
        refused too, naming resume and feedback, unless `fresh`: then that work is dropped, said.
        """
        try:
            claimed, refusal = try_claim(self.store, ticket_id, rerun=rerun,
                                         dependencies=self.config.run.dependencies, lease_s=self.lease_s,
                                         before_claim=lambda ticket: self._ready_to_start(ticket, fresh=fresh))
        except WorkLeft as left:
            if skip_claimed:
                return RunOutcome(ticket_id, "", "skipped", str(left))
            raise
        if claimed is not None:
            return self._drive(self._held(claimed))
        if skip_claimed:
            return RunOutcome(ticket_id, "", "skipped", refusal)
        raise TicketError(refusal)

    def work_refusal(self, ticket_id: str) -> str | None:
        """Why `middle run ID` (without --fresh) must not start the ticket over: the work its
        earlier run left, and what continues it; None when it left none (or runs in place)."""
        left = self._leftover(self.store.get_ticket(ticket_id))
        if not left:
            return None
        from orchestrator.lifecycle.next_steps import TABLE, command, situation

        head = f"ticket {ticket_id!r} has work from its earlier run ({left.describe()}), which a new run would delete"
        if (situation(self.store, ticket_id), "run") in TABLE:
            return f"{head}: {advise(self.store, ticket_id, 'run')}"
        return (f"{head}: continue it with {command('resume', ticket_id)} or {command('feedback', ticket_id)}, "
                f"or start over with {command('fresh', ticket_id)} (drops it)")

    def _leftover(self, ticket: Any) -> Any:
        """The ticket's work in this clone (orchestrator.workspace.leftover), or None."""
        project = Path(self.project_override or ticket.project_path)
        if self.worktrees is None or self.project_override or not project.is_dir():
            return None
        from orchestrator.workspace.leftover import leftover_work

        run = self.store.latest_run(ticket.id)
        return leftover_work(self.worktrees, project, ticket.id, run["base_branch"] if run else None)

    def run_claimed(self, claimed: ClaimedRun, token: int) -> RunOutcome:
        """Drive a new run this process has already claimed (a worker's `claim_next`, whose
        batch checked what `_ready_to_start` checks once for all its tickets)."""
        return self._drive(self._held(claimed, token))

    def _ready_to_start(self, ticket: Any, *, fresh: bool = False) -> None:
        """What must hold before a ticket that may start is claimed: its errors leave no run behind.
        Work an earlier run left is never dropped silently: refused (WorkLeft), or, `fresh`, dropped
        and said."""
        _ = self.agent  # a missing API key is an error before the ticket is claimed, not a failed run
        # so is an unknown `coding_agent:` (and its options), and a model API nothing answers at:
        # asked here, before the first turn, not when the agent is built (a run with nothing to run asks nothing)
        self.services.ready_coding_agent(ticket)
        project = Path(self.project_override or ticket.project_path)
        if self.worktrees is not None and project.is_dir():
            from orchestrator.workspace.git import toplevel

            repo = toplevel(project)  # not a repository: one clear error, nothing claimed
            left = self._leftover(ticket)
            if left and not fresh:
                raise WorkLeft(self.work_refusal(ticket.id) or "")
            if left:
                self.worktrees.remove(repo, ticket.id)  # its worktree, branch and work-in-progress ref
                self.say(f"--fresh: ticket {ticket.id} starts over; dropped its earlier work: {left.describe()}")

    def resume(self, ticket_id: str) -> RunOutcome:
        """Continue the ticket's latest run from its last checkpoint (a completed turn never re-runs).

        An interrupted run, a failed one whose failure can be retried (a Claude Code turn or the
        model failed, a check that could not run), and a failed one that kept its work (its check
        past its rounds: more rounds; the middle agent gave up or a limit ended it: the middle agent
        is asked again) continue, with the ticket's checks as `[check]` and its front matter say now
        (orchestrator.running.refresh). A complete run, or a failed one with no work, cannot.
        """
        run = self.store.latest_run(ticket_id)
        if run is None:
            self.store.get_ticket(ticket_id)  # a clear error for an unknown id
            raise TicketError(f"ticket {ticket_id!r} has never run: {advise(self.store, ticket_id, 'resume')}")
        if run["status"] == "failed" and self.store.get_ticket(ticket_id).status.value == "pending":
            # Its run stopped before any turn and put it back (a check that cannot run on the base,
            # a model that cannot be used): nothing was done, so it starts with `middle run`, as the
            # stop said; resumed, it would end "failed" while the ticket stays pending.
            raise TicketError(f"ticket {ticket_id!r} is pending: its last run stopped before any turn, so there "
                              f"is nothing to resume; {advise(self.store, ticket_id, 'resume')}")
        snapshot = self._checkpointed(lambda: self.graph.get_state(thread_config(run["id"])))
        if not snapshot.next and snapshot.created_at is None and run["status"] in ("running", "interrupted"):
            # The runner died before the graph's first checkpoint: nothing of this run was done,
            # so it starts over from its input, under the same run.
            _ = self.agent
            token = self.store.claim_for_resume(ticket_id, run["id"], lease_s=self.lease_s)
            self._stop_leftovers(run["id"])
            return self._drive(self._held(ClaimedRun(ticket_id, run["id"]), token))
        end = self.store.run_end_data(run["id"]) or {}
        reopen = run["status"] == "failed" and bool(end.get("kept_work"))
        # An ending node whose run's end is stored but not the checkpoint after it (a kill -9 in
        # between): the run ended there, as if that checkpoint were written.
        end_stored = (bool(snapshot.next) and set(snapshot.next) <= set(ENDING_NODES)
                      and run["status"] in ("complete", "failed") and self.store.run_end_data(run["id"]) is not None)
        ended_by_node = end_stored and not reopen
        if ended_by_node or (not snapshot.next and not snapshot.tasks and not reopen):
            # (A step whose node's writes were saved but not the checkpoint after it, as a store
            # outage can leave, has tasks and no `next`: it continues from those writes. An ending
            # node whose run's end is stored but not its checkpoint, a kill -9 in between, ended
            # the run: run again it would write a second run_start and run_end.)
            ended = f"{run['status']}: {run['reason']}" if run["reason"] else run["status"]
            raise TicketError(f"the last run of ticket {ticket_id!r} already ended ({ended}); "
                              f"{advise(self.store, ticket_id, 'resume')}")
        _ = self.agent  # as in run_ticket: a model that cannot be built fails before the claim
        overrides = resumed_checks(self.config, self.store, ticket_id)  # a bad ticket file: before the claim
        self.services.ready_coding_agent(current_ticket(self.store, ticket_id))  # so is an unknown agent
        token = self.store.claim_for_resume(ticket_id, run["id"], lease_s=self.lease_s)
        held = self._held(ClaimedRun(ticket_id, run["id"], fresh=False), token)
        self._stop_leftovers(run["id"])
        if reopen and (not snapshot.next or end_stored):
            # The middle agent gave up (or a limit ended it) with its work kept: the run goes back
            # to just before that assessment, so the middle agent is asked again (with the limits
            # and checks as configured now). Also when a kill -9 came between the failed run's end
            # and its checkpoint: the graph still stands before `fail`, which, run again, ended
            # the run a second time (judging the limits as configured now) and asked nobody.
            self._checkpointed(lambda: self.graph.update_state(
                thread_config(run["id"]), {"status": "running", "reason": ""}, as_node="recall_turn"))
            self.say("the middle agent assesses the work again, from where the run stopped")
        if (self.store.run_end_data(run["id"]) or {}).get("check_failed"):
            # Its check still failed after its rounds: resumed, it gets as many more.
            used = int(run["corrections"] or 0)
            held.set_fields(check_budget=used + self.config.check.max_rounds)
            more = self.config.check.max_rounds
            self.say(f"the check runs again; the middle agent may correct it {more} more time(s)" if more else
                     "the check runs again ([check] max_rounds = 0: the middle agent corrects nothing)")
        return self._drive(held, overrides)

    def feedback(self, ticket_id: str, text: str, *, by: str | None = None,
                 asks: PullAsks | None = None) -> RunOutcome:
        """The human's feedback (orchestrator.running.feedback): a complete or conflicted ticket
        continues on its branch in a new review round, run here; for a run in progress it is
        stored for that run's next assess (the outcome's status is then "stored"). A ticket whose
        worktree is not here continues its branch as pushed to the shared repository. `by`: what
        started it when no person did (a pull request's CI or review), its label; `asks`: that pull
        request's signals, recorded as acted on with the feedback (SignalsTaken: another process
        took them first)."""
        from orchestrator.running import feedback

        if feedback.check(self.store, ticket_id, text, worktrees=self.worktrees,
                          project_override=self.project_override) == feedback.STORED:
            message = feedback.store_for_run(self.store, ticket_id, text, by=by, asks=asks)
            if message is not None:
                return RunOutcome(ticket_id, "", "stored", message)
        _ = self.agent  # as in run_ticket: a missing API key is an error before the claim
        # the round's checks as [check] and the ticket's file say now (a person may have edited
        # `check:` or `allow_removed_tests:` to say what this round may do); a bad file: before the claim
        overrides = resumed_checks(self.config, self.store, ticket_id)
        self.services.ready_coding_agent(current_ticket(self.store, ticket_id))  # an unknown agent: before too
        delivered = feedback.deliver(self.store, ticket_id, text, lease_s=self.lease_s, by=by, asks=asks)
        if delivered.kind == feedback.STORED:  # another process started a round (or a run) meanwhile
            return RunOutcome(ticket_id, "", "stored", feedback.stored_message(self.store, ticket_id))
        return self._drive(self._held(ClaimedRun(ticket_id, delivered.run_id)), overrides)

    def _work_left(self, ticket_id: str) -> bool:
        """Whether the ticket's worktree holds work (never raises: asked while a run ends)."""
        try:
            return bool(self._leftover(self.store.get_ticket(ticket_id)))
        except Exception as exc:  # (the run's own error is what the user must see)
            log.warning("could not tell whether ticket %s's worktree holds work: %s", ticket_id, exc)
            return True  # (kept as work: never sent back to pending over work it may hold)

    def _drop_untouched(self, ticket_id: str) -> None:
        """A ticket sent back to pending before any work (the model cannot be used, its check
        cannot start) keeps no worktree or branch: nothing of the user's is in them (only what
        `[worktree]` copies and sets up, which the next run makes again). A worker's clone is its
        own: left alone. Never hides the error that stopped the run: a failure here is logged."""
        if self.worktrees is None or self.project_override:
            return
        try:
            ticket = self.store.get_ticket(ticket_id)
            run = self.store.latest_run(ticket_id)
            repo = run.get("repo") if run is not None else None
            if (ticket.status.value != "pending" or run is None or run.get("isolation") != "worktree"
                    or not repo or not run.get("worktree") or not Path(ticket.project_path).is_dir()
                    or self._leftover(ticket)):
                return
            self.worktrees.remove(repo, ticket_id)
        except Exception as exc:  # (the run's own error is what the user must see)
            log.warning("could not remove ticket %s's unused worktree: %s", ticket_id, exc)
            return
        self.say(f"removed ticket {ticket_id}'s worktree and branch: no work was done in them")

    def _stop_leftovers(self, run_id: str) -> None:
        """Kill the Claude Code processes a dead `middle` of this run left here, before a turn
        starts in the same worktree (taken over, so no live runner owns them)."""
        from orchestrator.procs.orphans import stop_dead_run

        if n := stop_dead_run(self.store, run_id):
            self.say(f"stopped {n} process(es) the run's previous `middle` left running")

    def _runner(self) -> str:
        from orchestrator.memory.curation import cli_user

        if self.started_by is None:  # asked once per driver: git is not run for every ticket
            self.started_by = cli_user(self.config.root)
        return self.started_by

    def _drive(self, run: Run, overrides: dict[str, Any] | None = None) -> RunOutcome:
        """Run the graph under the claim; every way out ends the run through the lifecycle.
        `overrides`: a resumed run's ticket checks as configured now (orchestrator.running.refresh)."""
        ticket_id, run_id = run.ticket_id, run.run_id
        graph_input = {"ticket_id": ticket_id, "run_id": run_id} if run.fresh else None
        cfg = thread_config(run_id)
        run.on_lost(lambda: stop_run_processes(run))
        self._runs[run_id] = run
        try:
            if graph_input is None:  # resumed: the steps whose end a killed process never recorded
                run.events.replay_missing(self._checkpointed(lambda: finished_steps(self.graph, cfg)))
            note = local_note_once(self.services)  # (the CLI's commands said it as they opened)
            if note:  # a server's or the Python API's first run: its log, which a server shows
                log.warning("note: %s", note)
            # `by`: who started it (a server's request's person, else git's user or the login):
            # a ticket doc's author on the board
            run.events.run_start(resume=graph_input is None, fake=self.services.fake, by=self._runner())
            with run:  # the heartbeat keeps the claim's lease while the graph runs
                self._checkpointed(lambda: self._stream(graph_input, cfg, run, overrides))
        except BaseException as exc:  # every way out ends the run as the one policy says
            ending = end_on_exception(exc, run, fake=self.services.fake, stop=self.stop,
                                      auto_resume=self.project_override is not None,  # a worker's
                                      work_left=lambda: self._work_left(ticket_id))
            run.close()
            if ending.propagate:
                self._drop_untouched(ticket_id)
                raise
            return RunOutcome(ticket_id, run_id, ending.status, ending.reason, self._turns(run_id),
                              self.store.total_cost(run_id), resumable=ending.resumable, offline=self.services.fake,
                              corrections=self._corrections(run_id))
        finally:
            self._runs.pop(run_id, None)
        run.close()
        state = self._checkpointed(lambda: self.graph.get_state(cfg)).values
        if state.get("status") == "complete":
            from orchestrator.running import feedback

            # Feedback that reached the run after its last assessment: the next round, now.
            following = feedback.continue_with_undelivered(self.store, ticket_id, run_id, lease_s=self.lease_s)
            if following is not None:
                self.say(f"feedback reached ticket {ticket_id} after its last assessment: round "
                         f"{following.number} continues it with those words")
                return self._drive(self._held(ClaimedRun(ticket_id, following.run_id)))
        return RunOutcome(ticket_id, run_id, state.get("status", "failed"), state.get("reason", ""),
                          state.get("turn", 0), self.store.total_cost(run_id), commit=state.get("commit"),
                          changes=len(state.get("changes") or []), offline=self.services.fake,
                          corrections=int(state.get("corrections") or 0))

    def _stream(self, graph_input: dict[str, Any] | None, cfg: RunnableConfig, run: Run,
                overrides: dict[str, Any] | None = None) -> None:
        # A resumed run (or a round) runs on the coding agent its ticket's file names now.
        ticket = current_ticket(self.store, run.ticket_id) if overrides is not None else None
        context = ticket_context(self.services, self.config, self.agent, run, say=self.say,
                                 on_event=self.on_event, stop=self.stop, project_override=self.project_override,
                                 ticket=ticket)
        context.ticket_overrides = overrides
        with running(run.run_id):  # the middle agent's calls through a CLI carry the run's marker
            self._steps(graph_input, cfg, context, run)

    def _steps(self, graph_input: dict[str, Any] | None, cfg: RunnableConfig, context: Any, run: Run) -> None:
        record = run.events
        # (langgraph types `context` as None on this overload whatever the graph's context schema)
        for task in self.graph.stream(graph_input, cfg, context=context,  # type: ignore[call-overload]
                                      stream_mode="tasks", durability="sync"):
            log.debug("graph task %s", task.get("name"))
            if self.stop.is_set():
                raise RunInterrupted("stopped")
            run.guard()  # taken over (or its lease could not be renewed): stop before the next step
            if "input" in task:  # a node starts
                record.node_started(task["name"], task.get("id"))
                if task["name"] in ENDING_NODES:
                    record.flush(wait=True)  # every event of the run before its run_end
            else:
                record.node_ended(task["name"], task.get("result"), task.get("error"), task=task.get("id"))

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

    def _corrections(self, run_id: str) -> int:
        return int(self.store.get_run(run_id).get("corrections") or 0)

    def close(self) -> None:
        self._checkpoints.close()
        if self._own_services:
            self.services.close()

    def __enter__(self) -> "TicketDriver":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def thread_config(run_id: str) -> RunnableConfig:
    """The LangGraph config of a run: its id is the checkpointer's thread id."""
    return {"configurable": {"thread_id": run_id}}


def ticket_context(services: Any, config: Any, agent: Any, run: Run, *,
                   say: Callable[[str], None] | None = None, on_event: Callable[[dict[str, Any]], None] | None = None,
                   stop: Any = None, project_override: str | None = None, ticket: Any = None) -> TicketContext:
    """The services one run's nodes use; its notes and Claude Code's events are recorded, then
    passed to `say` / `on_event` when given. `ticket`: the ticket as it is now (its `coding_agent:`
    picks the coding agent); default: as stored."""
    cfg = config
    record = run.events

    def noted(msg: str) -> None:
        record("note", {"text": msg})
        if say is not None:
            say(msg)

    # (asked before the claim where there is one: a worker's claim_next comes first, so here)
    coding_agent = services.ready_coding_agent(ticket or services.store.get_ticket(run.ticket_id))
    # Each progress event names its agent, so a log of tickets on different agents reads right.
    agent_title = title_of(coding_agent)

    def seen(event: dict[str, Any]) -> None:
        event = {**event, "agent": agent_title} if "agent" not in event else event
        record("coding_agent", event)
        if on_event is not None:
            on_event(event)

    return TicketContext(
        store=services.store, agent=agent, memory=services.memory,
        coding_agent=coding_agent,
        limits=Limits(cfg.agent.max_turns, cfg.agent.max_cost_usd),
        num_to_retrieve=cfg.memory.num_to_retrieve, hooks=services.registry.hook,
        on_event=seen, say=noted, lifecycle=services.lifecycle, worktrees=services.worktrees,
        dependencies=cfg.run.dependencies, stop=stop, project_override=project_override,
        check=cfg.check, worktree_setup=cfg.worktree, record=record, run=run,
    )
