"""Runs started from the API: each in a background thread with its own Orchestrator, one per ticket.

The request returns as soon as the run has claimed its ticket (the claim is the same atomic store
claim `middle run` takes, so a ticket is never run twice, here or in another process). Every run
shares the server's one Services; each thread has its own Orchestrator because each Orchestrator
owns a checkpoint connection.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from orchestrator.errors import MiddleError, TicketError
from orchestrator.lifecycle.next_steps import advice
from orchestrator.server.errors import Conflict
from orchestrator.services import Services
from tickets.claims import DEFAULT_LEASE_S, claim_is_live, this_host

log = logging.getLogger("middle.server.runs")

START_TIMEOUT_S = 120.0  # building the first Orchestrator may start the fake API and locate the CLI
TIDY_TIMEOUT_S = 30.0  # how long a new start waits for an ended run's thread to close its parts
POLL_S = 0.02  # how often a starting request looks for the run's claim


class FeedbackStored(Exception):
    """The feedback a round was to start with was stored for a run that began meanwhile (another
    process's round): the request answers `stored`, not `started`. Its message says so."""


@dataclass
class _Slot:
    ticket_id: str
    known_runs: set[str]
    expect_run: str | None = None  # a resume continues this run
    has_slot: bool = False  # holds one of the [run] parallel slots (else waits for one)
    run_id: str | None = None
    outcome: Any = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class RunManager:
    """Starts runs and resumes in the background; `active()` says what this server is running."""

    def __init__(self, services: Services, *, lease_s: float = DEFAULT_LEASE_S,
                 orchestrator_factory: Callable[..., Any] | None = None):
        self.services = services
        self.lease_s = lease_s
        self._factory = orchestrator_factory
        self._lock = threading.Lock()
        self.build_lock = threading.Lock()  # Services builds its parts lazily, not thread-safely
        # Feedback requests take turns until the round they start is claimed, so a second one
        # finds the ticket running and stores its words for that round (no 409 for a race).
        self.feedback_lock = threading.Lock()
        self._active: dict[str, _Slot] = {}
        self._threads: list[threading.Thread] = []
        self.stop = threading.Event()  # set at shutdown: runs stop between nodes
        # At most [run] parallel runs at once, as `middle run --parallel N`; more wait their turn.
        self._slots = threading.BoundedSemaphore(services.config.run.parallel)

    # -- public ------------------------------------------------------------------------------
    def start(self, ticket_id: str, *, rerun: bool = False, by: str | None = None) -> str | None:
        """Start a new run of the ticket; returns its run id once the ticket is claimed, or None
        when all [run] parallel slots are busy (it then starts, queued, as soon as one frees).
        `by`: who started it (the request's person, server.people.person), recorded on the run."""
        return self._launch(ticket_id, lambda orch: orch.run_ticket(ticket_id, rerun=rerun), by=by)

    def resume(self, ticket_id: str, *, by: str | None = None) -> str | None:
        """Continue the ticket's latest run from its checkpoint; returns that run's id."""
        latest = self.services.store.latest_run(ticket_id)
        return self._launch(ticket_id, lambda orch: orch.resume(ticket_id),
                            expect=latest["id"] if latest else None, by=by)

    def feedback(self, ticket_id: str, text: str, *, by: str | None = None) -> str | None:
        """Start the ticket's next review round with the human's feedback (`middle feedback`);
        returns its run id once claimed, or None when queued for a [run] parallel slot.
        FeedbackStored when another process started the round first (the words are its)."""
        return self._launch(ticket_id, lambda orch: orch.feedback(ticket_id, text), by=by)

    def active(self) -> dict[str, str | None]:
        """ticket id -> run id of the runs this server process is driving now. A run whose end is
        stored is not: its thread only closes its parts, and the ticket may be resumed or merged."""
        with self._lock:
            slots = list(self._active.items())
        return {tid: slot.run_id for tid, slot in slots if not self._tidying(slot)}

    def warm_up(self) -> None:
        """Import and build what a run needs (langgraph, the SDK, the coding agent, memory) ahead of the
        first request, so starting the first run answers as fast as the next ones."""
        try:
            with self.build_lock:
                import orchestrator.running.orchestrator  # noqa: F401

                for part in ("memory", "coding_agent", "agent_llm"):
                    getattr(self.services, part)
        except Exception as exc:  # e.g. no API key: the first run reports it to its caller
            log.debug("warming up the run services stopped: %s", exc)

    def interrupt_all(self) -> list[str]:
        """At shutdown: mark the runs still going as interrupted (as Ctrl-C does for `middle run`),
        so the board says so and `middle resume` continues them. Returns their ticket ids."""
        stopped = []
        self.stop.set()  # no new node or Claude Code turn starts in this server's runs
        for agent in self.services.coding_agents_built():  # every kind the runs' tickets picked
            stopper = getattr(agent, "stop_all", None)
            if stopper is not None:
                stopper("the server stopped")  # and the running turns' process groups are killed
        for ticket_id, run_id in self.active().items():
            if run_id is None:
                continue
            reason = (f"the server stopped during this run: "
                      f"{advice('interrupted', ticket_id, fake=self.services.fake)}")
            try:
                if self.services.lifecycle.interrupt(ticket_id, run_id, reason):
                    stopped.append(ticket_id)
            except Exception:  # shutting down: say what could not be recorded, and go on
                log.exception("marking the run of ticket %s interrupted failed", ticket_id)
        return stopped

    def join(self, timeout: float | None = None) -> None:
        """Wait for every background run to end (tests, and a polite shutdown)."""
        for thread in list(self._threads):
            thread.join(timeout)

    # -- internals ---------------------------------------------------------------------------
    def _tidying(self, slot: _Slot) -> bool:
        """The slot's run has ended in the store; its thread is still closing its orchestrator."""
        if slot.run_id is None:
            return False
        try:
            return bool(self.services.store.get_run(slot.run_id)["status"] != "running")
        except TicketError:
            return False

    def _launch(self, ticket_id: str, action: Callable[[Any], Any], expect: str | None = None,
                by: str | None = None) -> str | None:
        store = self.services.store
        with self._lock:
            previous = self._active.get(ticket_id)
        if previous is not None and self._tidying(previous):
            previous.done.wait(TIDY_TIMEOUT_S)  # the run ended a moment ago: start once it is tidy
        with self._lock:
            if ticket_id in self._active:
                running = self._active[ticket_id].run_id or "starting"
                raise Conflict(f"ticket {ticket_id!r} is already running in this server (run {running}): "
                               "follow it on its page, or wait for it to end")
            slot = _Slot(ticket_id, {r["id"] for r in store.list_runs(ticket_id)}, expect)
            slot.has_slot = self._slots.acquire(blocking=False)
            self._active[ticket_id] = slot
        thread = threading.Thread(target=self._work, args=(slot, action, by), daemon=True,
                                  name=f"middle-run-{ticket_id}")
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        if not slot.has_slot:
            return None  # queued
        run_id = self._wait_for_claim(slot)
        if run_id is not None:
            return run_id
        if getattr(slot.outcome, "status", None) == "stored":
            raise FeedbackStored(slot.outcome.reason)
        raise self._start_error(slot)

    def _wait_for_claim(self, slot: _Slot) -> str | None:
        """The run id once our thread holds the ticket's claim; None if the thread ended first
        without a run (its error is then in the slot)."""
        store = self.services.store
        waited = 0.0
        while waited < START_TIMEOUT_S:
            if slot.done.wait(POLL_S):
                break
            waited += POLL_S
            claim = store.get_claim(slot.ticket_id)
            # Only this process's claim on a run it had not seen before (or the run it resumes):
            # one start per ticket per process is guaranteed by _active.
            if (claim is not None and claim.pid == os.getpid() and claim.host == this_host()
                    and (claim.run_id == slot.expect_run if slot.expect_run
                         else claim.run_id not in slot.known_runs)):
                slot.run_id = claim.run_id
                return claim.run_id
        outcome = slot.outcome
        if outcome is not None and outcome.run_id:
            slot.run_id = outcome.run_id
        return slot.run_id  # also set when the run crashed after its claim (see _record_crash)

    def _start_error(self, slot: _Slot) -> MiddleError:
        exc = slot.error
        if exc is None:
            return TicketError(f"the run of ticket {slot.ticket_id!r} did not start within "
                               f"{START_TIMEOUT_S:.0f}s; see the server log")
        if isinstance(exc, TicketError):
            claim = self.services.store.get_claim(slot.ticket_id)
            if claim is not None and claim_is_live(claim):
                return Conflict(str(exc))
        if isinstance(exc, MiddleError):
            return exc
        return MiddleError(f"the run of ticket {slot.ticket_id!r} could not start: "
                           f"{type(exc).__name__}: {exc}")

    def _orchestrator(self, by: str | None = None) -> Any:
        if self._factory is not None:
            orch = self._factory()
            if by is not None:
                orch.started_by = by
            return orch
        from orchestrator.running.orchestrator import Orchestrator

        return Orchestrator(self.services.config, services=self.services, lease_s=self.lease_s,
                            stop=self.stop, started_by=by)

    def _work(self, slot: _Slot, action: Callable[[Any], Any], by: str | None = None) -> None:
        try:
            if not slot.has_slot:
                slot.has_slot = self._slots.acquire()  # queued: wait for a run to end
            if self.stop.is_set():
                return
            with self.build_lock:
                orch = self._orchestrator(by)
            try:
                slot.outcome = action(orch)
            finally:
                orch.close()
            log.info("run of ticket %s ended: %s", slot.ticket_id, getattr(slot.outcome, "status", "?"))
        except BaseException as exc:  # reported to the starting request, or logged and recorded
            slot.error = exc
            if not isinstance(exc, MiddleError):
                log.exception("the run of ticket %s crashed", slot.ticket_id)
                self._record_crash(slot, exc)
        finally:
            if slot.has_slot:
                self._slots.release()
            with self._lock:
                if self._active.get(slot.ticket_id) is slot:
                    del self._active[slot.ticket_id]
            slot.done.set()

    def _record_crash(self, slot: _Slot, exc: BaseException) -> None:
        """An unexpected error after the claim: mark the run failed so the board does not show a
        ticket running forever (MiddleErrors are recorded by the runner itself)."""
        store = self.services.store
        run = store.latest_run(slot.ticket_id)
        if run is None or run["status"] != "running" or (run["id"] in slot.known_runs and not slot.expect_run):
            return
        slot.run_id = slot.run_id or run["id"]
        reason = (f"internal error: {type(exc).__name__}: {exc}; the server log has the details; "
                  f"{advice('failed-resumable', slot.ticket_id, fake=self.services.fake)}")
        try:
            self.services.lifecycle.fail(slot.ticket_id, run["id"], reason, resumable=True)
        except Exception:
            log.exception("recording the crash of ticket %s failed", slot.ticket_id)
