"""A batch of tickets, N at once (`middle run --parallel N`, `[run] parallel`): order, limits, stop.

Each ticket runs in a thread of its own with its own driver (a TicketDriver of the caller's type; each owns a checkpoint
connection) over the batch's shared services, each under the same atomic claim as a single run,
so a second `middle run` process still never runs one of them twice. A ticket starts once its
dependencies are done; the batch stops starting tickets when `[run] max_cost_usd_total` is
reached, or at the first model API that cannot be used at all (a rejected key: every other
ticket would fail the same way, so they stay pending). Ctrl-C, SIGTERM and SIGHUP stop every
running ticket: Claude Code's process groups are killed and each run is marked interrupted.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Protocol

from orchestrator.errors import (
    BatchStopper,
    CheckCannotStart,
    CodingAgentMissing,
    CodingAgentUnreachable,
    ConfigError,
    MiddleError,
    RunInterrupted,
    StoreUnavailable,
    TicketError,
)
from orchestrator.lifecycle.next_steps import advice, advise
from orchestrator.lifecycle.run_lifecycle import start_refusal
from orchestrator.running.driver import TicketDriver
from orchestrator.running.outcome import RunOutcome
from tickets.claims import this_host
from tickets.deps import SATISFIED, run_order

if TYPE_CHECKING:
    from tickets.store import TicketStore

log = logging.getLogger("middle.batch")

POLL_S = 0.2  # the main thread wakes this often, so a signal is handled at once
STOP_GRACE_S = 15.0  # after a stop, how long running tickets get to record their interruption
NOT_STARTED = "not run: the model cannot be used (see the error below)"
MISSING_CLI = "not run: its coding agent's CLI is not here (see the error below)"
UNREACHABLE = "not run: nothing answers at its coding agent's model API (see the error below)"


class BatchView(Protocol):
    """What a batch reports as it goes (the CLI draws it; the default logs it)."""

    def started(self, ticket: Any) -> None: ...
    def say(self, ticket_id: str, msg: str) -> None: ...
    def event(self, ticket_id: str, event: dict[str, Any]) -> None: ...
    def finished(self, outcome: RunOutcome) -> None: ...


class LogView:
    def started(self, ticket: Any) -> None:
        log.info("ticket %s started", ticket.id)

    def say(self, ticket_id: str, msg: str) -> None:
        log.info("[%s] %s", ticket_id, msg)

    def event(self, ticket_id: str, event: dict[str, Any]) -> None:
        pass

    def finished(self, outcome: RunOutcome) -> None:
        log.info("ticket %s %s", outcome.ticket_id, outcome.status)


class BatchInterrupted(RunInterrupted):
    """The batch was stopped; `ticket_ids` were running and are now interrupted (resumable)."""

    def __init__(self, why: str, ticket_ids: list[str], outcomes: list[RunOutcome]):
        super().__init__(why)
        self.ticket_ids, self.outcomes = ticket_ids, outcomes


@dataclass
class BatchResult:
    outcomes: list[RunOutcome] = field(default_factory=list)
    stopped: str | None = None  # why the batch stopped starting tickets early (cost limit)
    errors: list[MiddleError] = field(default_factory=list)  # named tickets refused
    fatal: BatchStopper | None = None  # the model cannot be used: the batch stopped


@dataclass(frozen=True)
class Start:
    """A ticket a backlog hands out, and how one driver runs it (`drive(driver)`: a run already
    claimed, or a resume that claims it)."""

    ticket_id: str
    drive: Callable[[TicketDriver], RunOutcome]


class Backlog(Protocol):
    """Where a worker's batch takes its next ticket from (orchestrator/running/fleet.py)."""

    def next(self) -> Start | None: ...
    def finished(self, outcome: RunOutcome) -> None: ...


@dataclass
class _Slot:
    ticket_id: str
    thread: threading.Thread | None = None
    outcome: RunOutcome | None = None
    error: BaseException | None = None


def run_batch(orch: TicketDriver, ticket_ids: list[str], *, parallel: int | None = None,
              rerun: bool = False, named: bool = False, view: BatchView | None = None,
              blocked: dict[str, str] | None = None, backlog: Backlog | None = None,
              fresh: bool = False) -> BatchResult:
    """Run the tickets, at most `parallel` at once (default `[run] parallel`).

    `named`: the user named these tickets, so one that cannot start is an error (else it is
    skipped, as the pending list skips tickets another runner holds). `blocked`: ticket id ->
    why it can never start as written (a dependency problem). `backlog`: once the tickets are
    placed, fill free slots from it until it has nothing (a worker's queue: new runs it claimed,
    runs a dead runner left behind, due retries). `fresh`: a ticket whose earlier run left work
    starts over, dropping it (else a named one is refused, saying how to continue it).
    """
    view = view or LogView()
    parallel = parallel or orch.config.run.parallel
    cap = orch.config.run.max_cost_usd_total
    mode = orch.config.run.dependencies
    store = orch.store
    result = BatchResult()
    tickets = run_order([store.get_ticket(t) for t in ticket_ids])
    batch_ids = {t.id for t in tickets}
    for t in tickets:  # what can never start (a wrong status, a missing dependency): say so first
        why = (blocked or {}).get(t.id) or start_refusal(store, t.id, rerun=rerun, dependencies=mode,
                                                         in_batch=batch_ids)
        if why is None and named and not fresh:
            why = orch.work_refusal(t.id)  # never starts over silently on an earlier run's work
        if why and named:
            raise TicketError(why)
    # A missing API key is one error before anything is claimed; after the refusals above, which
    # say what to do instead (`middle run` of a complete ticket needs no key to be told to merge).
    if not tickets and backlog is None:
        return result
    _ = orch.agent  # the model first: a missing API key is one error before anything is claimed
    # Why a pending ticket went back to the backlog (an earlier batch could not reach the model)
    # is stale once this batch tries again: each ticket it runs gets its own note.
    store.clear_pending_notes(sorted(batch_ids))
    _check_repositories(orch, tickets)
    queue_: list[Any] = list(tickets)
    active: dict[str, _Slot] = {}
    done: queue.Queue[_Slot] = queue.Queue()
    started_runs: list[str] = []
    stop_starting: str | None = None

    def skip(ticket: Any, why: str) -> None:
        outcome = RunOutcome(ticket.id, "", "skipped", why)
        result.outcomes.append(outcome)
        view.finished(outcome)
        if named:
            result.errors.append(TicketError(why))

    def launch(ticket: Any, drive: Callable[[TicketDriver], RunOutcome] | None = None) -> None:
        slot = _Slot(ticket.id)
        child = type(orch)(orch.config, services=orch.services, lease_s=orch.lease_s, stop=orch.stop,
                           project_override=orch.project_override,
                           say=partial(view.say, ticket.id), on_event=partial(view.event, ticket.id))

        def work() -> None:
            try:
                if drive is not None:
                    slot.outcome = drive(child)
                else:
                    slot.outcome = child.run_ticket(ticket.id, rerun=rerun, skip_claimed=not named, fresh=fresh)
            except BaseException as exc:  # reported by the main thread
                slot.error = exc
            finally:
                child.close()
                done.put(slot)

        slot.thread = threading.Thread(target=work, name=f"middle-run-{ticket.id}", daemon=True)
        active[ticket.id] = slot
        view.started(ticket)
        slot.thread.start()

    try:
        while queue_ or active or backlog is not None:
            if stop_starting is None and cap is not None:
                spent = sum(store.total_cost(r) for r in started_runs) + sum(
                    o.cost_usd for o in result.outcomes if o.run_id and o.run_id not in started_runs)
                if spent >= cap:
                    stop_starting = (f"the batch's cost limit is reached (${spent:.4f} of [run] "
                                     f"max_cost_usd_total ${cap:.2f})")
            if stop_starting is None and result.fatal is None:
                try:
                    for ticket in list(queue_):
                        if len(active) >= parallel:
                            break
                        state = _readiness(store, ticket, mode, rerun, batch_ids, queue_, active, blocked)
                        if state == "wait":
                            continue
                        queue_.remove(ticket)
                        if state is not None:
                            skip(ticket, state)
                        else:
                            launch(ticket)
                    while backlog is not None and len(active) < parallel and (start := backlog.next()):
                        launch(store.get_ticket(start.ticket_id), start.drive)
                except StoreUnavailable as exc:  # the running ones still end (interrupted, saying so)
                    stop_starting = f"the store is out of reach: {exc}"
            if not active:  # (with a backlog: it had nothing more)
                if queue_ and result.fatal is not None and not stop_starting:
                    # The model cannot be used: said once (the CLI's error line); these never
                    # started and stay pending, as the summary counts them.
                    result.outcomes += [RunOutcome(t.id, "", "pending", NOT_STARTED) for t in queue_]
                elif queue_:  # nothing running and nothing can start: say why for each
                    for ticket in queue_:
                        skip(ticket, stop_starting or "its dependencies did not finish in this batch")
                queue_.clear()
                break
            try:
                slot = done.get(timeout=POLL_S)
            except queue.Empty:
                continue
            active.pop(slot.ticket_id, None)
            _collect(slot, result, view, started_runs, named, store=store, per_kind=backlog is None)
            if backlog is not None:
                backlog.finished(result.outcomes[-1])
    except KeyboardInterrupt as exc:
        why = exc.why if isinstance(exc, RunInterrupted) else "interrupted by the user"
        raise _stop_all(orch, active, done, why, result) from None
    if stop_starting:
        result.stopped = stop_starting
    return result


def _check_repositories(orch: TicketDriver, tickets: list[Any]) -> None:
    """Each project a ticket runs in must be a git repository with a commit (isolation =
    worktree): one clear error before anything is claimed, rather than one failure per ticket."""
    if orch.worktrees is None:
        return
    from pathlib import Path

    from orchestrator.workspace.git import toplevel

    for path in sorted({orch.project_override or t.project_path for t in tickets}):
        if Path(path).is_dir():  # a missing folder is the ticket's own error, reported by its run
            toplevel(Path(path))


def _readiness(store: TicketStore, ticket: Any, mode: str, rerun: bool, batch_ids: set[str], queue_: list[Any],
               active: dict[str, _Slot], blocked: dict[str, str] | None) -> str | None:
    """None: start it now; "wait": a dependency is still queued or running in this batch; else
    the reason it is skipped."""
    if blocked and ticket.id in blocked:
        return blocked[ticket.id]
    pending = {t.id for t in queue_} | set(active)
    for dep in ticket.depends_on:
        if dep in pending and dep != ticket.id:
            status = store.get_ticket(dep).status.value
            if status not in SATISFIED[mode]:
                return "wait"
    return start_refusal(store, ticket.id, rerun=rerun, dependencies=mode)


def _collect(slot: _Slot, result: BatchResult, view: BatchView, started_runs: list[str], named: bool,
             store: TicketStore | None = None, per_kind: bool = True) -> None:
    """`per_kind`: a missing CLI holds only the tickets on its agent (a worker's batch, whose queue
    would offer them again at once, stops at it instead, as at a model that cannot be used)."""
    if slot.outcome is not None:
        if slot.outcome.run_id:
            started_runs.append(slot.outcome.run_id)
        result.outcomes.append(slot.outcome)
        view.finished(slot.outcome)
        if named and slot.outcome.status == "skipped":
            result.errors.append(TicketError(slot.outcome.reason))
        return
    exc = slot.error
    if isinstance(exc, CodingAgentMissing) and per_kind:
        # Only the tickets on that agent meet it (a ticket's `coding_agent:` names its own): each
        # stays pending, unclaimed, the error said once, and the tickets on other agents go on.
        outcome = RunOutcome(slot.ticket_id, "", "pending",
                             UNREACHABLE if isinstance(exc, CodingAgentUnreachable) else MISSING_CLI)
        if all(str(e) != str(exc) for e in result.errors):
            result.errors.append(exc)
    elif isinstance(exc, BatchStopper):
        # The same error for every ticket that met it: the batch reports it once (`fatal`); each
        # ticket's outcome is what its status now is (back to pending when no turn had finished).
        result.fatal = result.fatal or exc
        run = store.latest_run(slot.ticket_id) if store is not None else None
        if store is not None and run is not None and store.get_ticket(slot.ticket_id).status.value == "failed":
            outcome = RunOutcome(slot.ticket_id, run["id"], "failed",
                                 f"stopped by that error; {advise(store, slot.ticket_id)}", resumable=True)
        else:
            outcome = RunOutcome(slot.ticket_id, "", "pending", NOT_STARTED)
    elif isinstance(exc, MiddleError):
        # A store out of reach before the run began (the claim) changed nothing: the ticket is
        # still pending, and the next pass (a worker's loop, the user's next `middle run`) takes it.
        later = isinstance(exc, (TicketError, StoreUnavailable))
        # A mistake in the ticket's own settings found before its claim (a `coding_agent:` no
        # plugin registers): nothing ran and the ticket is still pending, so it is not "failed";
        # it is an `error:` line to fix, while the other tickets of the batch go on.
        untouched = (not later and isinstance(exc, ConfigError) and store is not None
                     and store.get_ticket(slot.ticket_id).status.value == "pending")
        status = "skipped" if later or untouched else "failed"
        why = ("not run: its check command cannot run (the error below)" if isinstance(exc, CheckCannotStart)
               else "not started: its settings have a mistake (the error below)")
        outcome = RunOutcome(slot.ticket_id, "", status, why if untouched else str(exc))
        if named or untouched:
            result.errors.append(exc)
    else:
        log.error("the run of ticket %s crashed", slot.ticket_id, exc_info=exc)
        outcome = RunOutcome(slot.ticket_id, "", "failed", f"internal error: {type(exc).__name__}: {exc}")
    result.outcomes.append(outcome)
    view.finished(outcome)


def _stop_all(orch: TicketDriver, active: dict[str, _Slot], done: queue.Queue, why: str,
              result: BatchResult) -> BatchInterrupted:
    """Stop every running ticket: no new node or turn starts, Claude Code is killed, each run is
    marked interrupted (by its own thread, or here for one that does not answer in time)."""
    running = sorted(active)
    orch.stop.set()
    for agent in orch.services.coding_agents_built():  # every kind the batch's tickets run on
        stopper = getattr(agent, "stop_all", None)
        if stopper is not None:
            stopper(why)
    deadline = threading.Event()
    timer = threading.Timer(STOP_GRACE_S, deadline.set)
    timer.start()
    try:
        while active and not deadline.is_set():
            try:
                slot = done.get(timeout=POLL_S)
            except queue.Empty:
                continue
            active.pop(slot.ticket_id, None)
            if slot.outcome is not None:
                result.outcomes.append(slot.outcome)
            elif not isinstance(slot.error, KeyboardInterrupt):
                result.outcomes.append(RunOutcome(slot.ticket_id, "", "failed", str(slot.error)))
    except KeyboardInterrupt:  # a second Ctrl-C: stop waiting, mark what is left below
        pass
    finally:
        timer.cancel()
    for ticket_id in list(active):  # still inside a model call: end its run from here
        run = orch.store.latest_run(ticket_id)
        claim = orch.store.get_claim(ticket_id)
        if run and run["status"] == "running" and claim and claim.host == this_host():
            orch.lifecycle.interrupt(
                ticket_id,
                run["id"],
                f"{why}: {advice('interrupted', ticket_id, fake=orch.services.fake)}",
                auto_resume=orch.project_override is not None,
            )  # as the runner does
    interrupted = [t for t in running if orch.store.get_ticket(t).status.value == "interrupted"]
    return BatchInterrupted(why, interrupted, result.outcomes)
