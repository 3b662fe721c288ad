"""One claimed run, typed and fenced: what the driver, the batch, the graph's nodes and a takeover
all go through to read and write a run.

A `Run` holds the claim this process took (its ticket, run id and fencing token), keeps the
claim's lease alive (`Heartbeat`), records the run's events (`EventRecorder`), and is the only way
the run writes to shared state: run fields, turns, assessments, events and the run's end all name
its token, and the store refuses them (ClaimLost) once another runner has taken the run over.
Git steps that cannot be fenced inside a transaction (commit, push, the memory index, a
checkpoint) call `check()` just before: the token is read from the store then.

A run that loses its claim stops at once: the heartbeat finds the lease taken over, or cannot
renew it before it runs out (the store is out of reach; by then another worker may take the run
over), or a write is refused. `lost` is set, the run's Claude Code and check processes on this
machine are killed, and the next step raises ClaimLost; the policy then writes nothing more
(except, when the store was only out of reach, the run's own end once it is back: `interrupted`,
still fenced by the token in the store).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from orchestrator.errors import ClaimLost, StoreUnavailable
from orchestrator.killpoints import point
from orchestrator.running.events import EventRecorder
from tickets.model import RunRow, TurnRow

if TYPE_CHECKING:
    from orchestrator.lifecycle.run_lifecycle import RunLifecycle
    from tickets.store import TicketStore

log = logging.getLogger("middle.run")
LOOKUP_S = 2.0  # how long a lost run waits to learn who holds its ticket now (the store may be out)


class Run:
    """A run this process holds the claim of. Use as a context manager around its driving: the
    heartbeat runs inside, and the events are flushed on the way out."""

    def __init__(self, store: TicketStore, lifecycle: RunLifecycle, ticket_id: str, run_id: str, token: int, *,
                 lease_s: float, reconnect_s: float, fresh: bool = True):
        self.store, self.lifecycle = store, lifecycle
        self.ticket_id, self.run_id, self.token = ticket_id, run_id, token
        self.lease_s, self.fresh = lease_s, fresh
        self.lost = threading.Event()
        self.lost_why = ""
        # Lost because the store was out of reach for two thirds of the lease (not taken over):
        # once the store is back, the run's own end (interrupted) is still its to write, fenced
        # by its token, unless another runner took it over meanwhile.
        self.outage = False
        self.ended = False  # this process ended the run (its end was fenced): its claim is gone now
        self._ending = False  # this process is ending the run now
        # Set while no end of this process is under way: a refusal met by another thread during
        # the end waits for it (see `_ended_here`). (An Event: set = settled.)
        self._end_settled = threading.Event()
        self._end_settled.set()
        self._ending_thread: int | None = None
        self._on_lost: list[Callable[[], None]] = []
        self.sessions: set[str] = set()  # Claude Code sessions started here (killed if the run is lost)
        self.events = EventRecorder(store, ticket_id, run_id, reconnect_s, token=token, on_refused=self.lose)
        self._heartbeat = Heartbeat(self)

    @classmethod
    def held(cls, store: TicketStore, lifecycle: RunLifecycle, ticket_id: str, run_id: str, *, lease_s: float,
             reconnect_s: float, fresh: bool = True) -> "Run":
        """The run whose claim this process has just taken (its token read from the claim)."""
        claim = store.claim_of_run(run_id)
        if claim is None:
            raise ClaimLost(f"run {run_id} of ticket {ticket_id} is not claimed any more: another runner "
                            "ended or took it over before it started here")
        return cls(store, lifecycle, ticket_id, run_id, claim.token, lease_s=lease_s, reconnect_s=reconnect_s,
                   fresh=fresh)

    # -- losing the claim -----------------------------------------------------------------------
    def on_lost(self, fn: Callable[[], None]) -> None:
        """Call `fn` (from any thread) if the run loses its claim: kill what works for it."""
        self._on_lost.append(fn)

    def lose(self, why: str, *, renewal: bool = False, outage: bool = False) -> None:
        """The claim is not ours any more: stop at the next step and kill the run's processes.
        `renewal`: the heartbeat found the claim gone, which is no loss while this process is
        ending the run itself (its claim goes with its end). `outage`: the claim could not be
        renewed (the store out of reach), so it may still be ours."""
        if self.lost.is_set() or (renewal and (self._ending or self.ended)):
            return
        if self._ended_here():  # its own end, stored meanwhile, took the claim: nothing is lost
            return
        self.lost_why, self.outage = why, outage
        self.lost.set()
        log.warning("ticket %s: %s", self.ticket_id, why)
        for fn in self._on_lost:
            try:
                fn()
            except Exception:  # stopping what runs for the run must not hide why it stopped
                log.exception("stopping the processes of run %s failed", self.run_id)

    def lost_reason(self, fallback: str = "") -> str:
        """Why the run stopped here, naming the runner that holds its ticket now when the store
        says so at once: a run whose lease ran out while this process was stopped (SIGSTOP, a
        laptop asleep) may already be someone else's. Else what was known when it was lost."""
        known = self.lost_why or fallback
        found: list[Any] = []
        look = threading.Thread(target=lambda: found.append(self.store.get_claim(self.ticket_id)),
                                name=f"lost-{self.ticket_id}", daemon=True)  # the store may be out of reach
        look.start()
        look.join(LOOKUP_S)
        holder = found[0] if found else None
        if holder is None or holder.token == self.token:
            return known
        whose = "took it over" if holder.run_id == self.run_id else f"claimed it for run {holder.run_id}"
        return (f"ticket {self.ticket_id}: the worker on {holder.host} (pid {holder.pid}) {whose}; this runner "
                f"stopped run {self.run_id} here and wrote nothing more of it")

    def _ended_here(self) -> bool:
        """Whether this process ended the run, waiting first for an end under way in another
        thread. A write refused for want of the claim while this process ends the run (a
        checkpoint LangGraph writes in its own thread, an event) met that end, not a takeover:
        the end releases the claim in its transaction a moment before it is marked `ended`."""
        if self._ending_thread is not None and self._ending_thread != threading.get_ident():
            self._end_settled.wait()
        return self.ended

    def guard(self) -> None:
        """Raise ClaimLost once the run lost its claim (no store call)."""
        if self.lost.is_set():
            raise ClaimLost(self.lost_why)

    def check(self) -> None:
        """Before a step the store cannot fence (a commit, a push, a checkpoint): the token is
        still the claim's, read from the store now. Refused because this process has just ended
        the run: no loss, the write is the ended run's own (as every write after its end is)."""
        self.guard()
        try:
            self._fenced(self.store.check_fence, self.run_id, self.token)
        except ClaimLost:
            if not self._ended_here():
                raise

    def _fenced(self, write: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.guard()
        try:
            return write(*args, **kwargs)
        except ClaimLost as exc:
            self.lose(str(exc))
            raise

    # -- reads ------------------------------------------------------------------------------------
    def record(self) -> RunRow:
        return self.store.get_run(self.run_id)

    def turn(self, turn_no: int) -> TurnRow | None:
        return self.store.get_turn(self.run_id, turn_no)

    def turns(self) -> list[TurnRow]:
        return self.store.list_turns(run_id=self.run_id)

    def round(self) -> int:
        return int(self.store.round_of(self.run_id))

    def total_cost(self) -> float:
        return float(self.store.total_cost(self.run_id))

    # -- fenced writes ----------------------------------------------------------------------------
    def set_fields(self, **fields: Any) -> None:
        self._fenced(self.store.set_run_fields, self.run_id, token=self.token, **fields)
        point("run.fields")

    def start_turn(self, turn_no: int, prompt: str, session_id: str | None, resume: bool,
                   coding_agent: str | None = None) -> None:
        if session_id:
            self.sessions.add(session_id)
        self._fenced(self.store.start_turn, self.run_id, turn_no, prompt, session_id, resume, token=self.token,
                     coding_agent=coding_agent)
        point("turn.started")

    def finish_turn(self, turn_no: int, **result: Any) -> None:
        self._fenced(self.store.finish_turn, self.run_id, turn_no, token=self.token, **result)
        point("turn.finished")

    def turn_observed(self, turn_no: int) -> bool:
        return self.store.turn_observed(self.run_id, turn_no)

    def mark_observed(self, turn_no: int) -> None:
        """The turn's round was given to memory's conversation-watching backends (observe_round)."""
        self._fenced(self.store.mark_turn_observed, self.run_id, turn_no, token=self.token)

    def turn_hooked(self, turn_no: int) -> bool:
        return self.store.turn_hooked(self.run_id, turn_no)

    def mark_hooked(self, turn_no: int) -> None:
        """The plugins' on_turn_end hook ran for the turn."""
        self._fenced(self.store.mark_turn_hooked, self.run_id, turn_no, token=self.token)

    def assess_turn(self, turn_no: int, memories: str, decision: dict[str, Any]) -> None:
        self._fenced(self.store.set_turn_assessment, self.run_id, turn_no, memories, decision, token=self.token)
        point("turn.assessed")

    def put_check_baseline(self, base_commit: str, command: str, result: dict[str, Any]) -> None:
        """A check command's result on the base commit, shared by every ticket from it: written
        under the run's token (a stale owner's is refused), and never one of a killed, timed-out
        or cancelled check (the store drops those)."""
        self._fenced(self.store.put_check_baseline, base_commit, command, result, run_id=self.run_id,
                     token=self.token)
        point("check.baseline")

    def event(self, kind: str, data: dict[str, Any]) -> None:
        """A run event (recorded in order; waits in this process while the store is out)."""
        self.events(kind, data)

    def complete(self, summary: str, *, say: Callable[[str], None] | None = None, **event: Any) -> bool:
        self.events.flush(wait=True)
        return self._end(self.lifecycle.complete, self.ticket_id, self.run_id, summary, say=say,
                         token=self.token, **event)

    def fail(self, reason: str, **how: Any) -> bool:
        return self._end(self.lifecycle.fail, self.ticket_id, self.run_id, reason, token=self.token, **how)

    def interrupt(self, reason: str, *, auto_resume: bool = False, after_outage: bool = False) -> bool:
        """`after_outage`: the run stopped because its claim could not be renewed while the store
        was out of reach; its end is written all the same, refused by the store (ClaimLost) if
        another runner took the run over meanwhile."""
        return self._end(self.lifecycle.interrupt, self.ticket_id, self.run_id, reason,
                         auto_resume=auto_resume, token=self.token, guarded=not (after_outage and self.outage))

    def _end(self, end: Callable[..., Any], *args: Any, guarded: bool = True, **kwargs: Any) -> bool:
        self._ending = True
        self._ending_thread = threading.get_ident()
        self._end_settled.clear()
        try:
            if guarded:
                ended = bool(self._fenced(end, *args, on_ended=self._ended, **kwargs))
            else:  # fenced by the store alone (the token in the end's transaction)
                ended = bool(end(*args, on_ended=self._ended, **kwargs))
        finally:
            self._ending = False
            self._ending_thread = None
            self._end_settled.set()
        point("run.ended")
        return ended

    def _ended(self) -> None:
        """The run's (fenced) end is stored: its claim is gone, so what follows (the end's hooks'
        notes, the checkpoint after the ending node) is written as the ended run's, unfenced."""
        self.ended = True
        self.events.token = None

    # -- the run's span ---------------------------------------------------------------------------
    def __enter__(self) -> "Run":
        self._heartbeat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._heartbeat.stop()

    def close(self) -> None:
        """The run is over here: its events that wait for the store get a last try."""
        self._heartbeat.stop()
        self.events.close()


class Heartbeat:
    """Renews the run's lease every third of it, by the database's clock. A renewal refused (the
    run was taken over) loses the run at once; renewals that fail for longer than two thirds of
    the lease (the store out of reach) lose it before the lease can run out, so no other worker
    ever works the run while this one still does."""

    def __init__(self, run: Run):
        self.run = run
        self.renewed = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self.renewed = time.monotonic()
        self._thread = threading.Thread(target=self._watch, name=f"lease-{self.run.ticket_id}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._thread = None

    def _watch(self) -> None:
        # The renewal runs in a thread of its own: a store call may block (retrying an outage for
        # [store] reconnect_s), and the run must still be stopped before its lease runs out.
        run, lease = self.run, self.run.lease_s
        renewing: threading.Thread | None = None
        while not self._stop.wait(lease / 6) and not run.lost.is_set():
            idle = renewing is None or not renewing.is_alive()
            if idle and time.monotonic() - self.renewed >= lease / 3:
                renewing = threading.Thread(target=self._renew, name=f"renew-{run.ticket_id}", daemon=True)
                renewing.start()
            if time.monotonic() - self.renewed >= lease * 2 / 3:
                run.lose(f"the claim on ticket {run.ticket_id} could not be renewed for "
                         f"{time.monotonic() - self.renewed:.0f}s of its {lease:.0f}s lease: the run stopped here "
                         "before another runner may take it over (it is resumed from its last step)", outage=True)
                return

    def _renew(self) -> None:
        run = self.run
        try:
            if run.store.refresh_claim(run.ticket_id, run.run_id, run.lease_s, token=run.token):
                self.renewed = time.monotonic()
            elif not self._stop.is_set():
                holder = run.store.get_claim(run.ticket_id)
                who = f"the worker on {holder.host} (pid {holder.pid})" if holder is not None else "another runner"
                run.lose(f"the claim on ticket {run.ticket_id} was taken over by {who}: this one "
                         "stopped its run and writes nothing more of it", renewal=True)
        except StoreUnavailable as exc:
            log.warning("renewing the claim on ticket %s failed: %s", run.ticket_id, exc)
        except Exception:  # a busy database now is retried at the next beat
            log.exception("renewing the claim on ticket %s failed", run.ticket_id)


def stop_run_processes(run: Run) -> None:
    """Kill the coding agent's turns, check commands and model calls through a CLI this process
    runs for `run` (its claim is lost): by their markers (orchestrator.procs.orphans), no store call needed."""
    from orchestrator.procs.orphans import run_marks, stop_marked

    n = stop_marked(run.sessions | run_marks(run.run_id), owner="self")
    if n:
        log.warning("stopped %d process(es) of run %s, whose claim was lost", n, run.run_id)


def fence_checkpoints(saver: Any, runs: dict[str, Run]) -> None:
    """Fence `saver`'s writes: a checkpoint of a run in `runs` (by thread id) is written only
    while that run still holds its claim, so a stale owner never adds a step to a run another
    runner continues. (The checkpoint store is apart from the ticket store, so the token is read
    just before the write rather than inside its transaction; the heartbeat stops a run well
    before its lease can run out, which covers the gap.)"""
    put, put_writes = saver.put, saver.put_writes

    def fence(config: Any) -> None:
        run = runs.get(str((config.get("configurable") or {}).get("thread_id")))
        if run is not None and not run.ended:  # (the checkpoint after its fenced end is its own)
            run.check()

    def fenced_put(config: Any, *args: Any, **kwargs: Any) -> Any:
        fence(config)
        written = put(config, *args, **kwargs)
        point("checkpoint.put")
        return written

    def fenced_put_writes(config: Any, *args: Any, **kwargs: Any) -> Any:
        fence(config)
        return put_writes(config, *args, **kwargs)

    saver.put, saver.put_writes = fenced_put, fenced_put_writes


__all__ = ["Run", "Heartbeat", "fence_checkpoints", "stop_run_processes"]
