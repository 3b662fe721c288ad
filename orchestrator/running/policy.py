"""How an exception ends a run: the one policy both drivers of the ticket graph apply.

The runner (`middle run`, `middle serve`, the Python API) and the LangGraph Server entry call
`end_on_exception` with whatever stopped the graph; it ends the run through the one owner of run
ends (`RunLifecycle`), so the ticket's status never depends on which driver ran it:

- StoreUnavailable: interrupted, and any worker resumes it once the store is back (a retry);
- BatchStopper (the model cannot be used): failed; the ticket goes back to `pending` when no turn
  finished in a run that started from its input and its worktree holds no work (a turn that
  wrote, then failed so), else stays failed and resumable; the driver raises it on (a batch stops
  and says it once), and removes the worktree and branch of a ticket put back to pending;
- CheckCannotStart before any turn of a ticket's first round (its check command is not found or
  cannot run on the base commit: a mistake in the user's config, not a failed ticket): the ticket
  goes back to `pending` (nothing was done, so nothing is lost) and the driver raises it on, so
  `middle run` says it as one `error:` line; `middle run ID` takes it once the config is fixed.
  On a worker (`auto_resume`) it fails the ticket as any MiddleError does: a pending ticket would
  be claimed again at once, in a loop;
- CheckFailed (the check still fails after its rounds): failed and resumable, marked so
  (`middle feedback` starts a round on its branch; `middle resume` gives it more rounds);
- any other MiddleError: failed and resumable (`middle resume` retries the failed node); on a
  worker, a Claude Code turn that crashed or timed out is marked passing, and retried by any
  worker a bounded number of times with growing waits (tickets/queue.py);
- KeyboardInterrupt / RunInterrupted: interrupted; the driver raises it on;
- anything else (a bug): failed, "internal error: ...", resumable; the driver raises it on;
- a run whose heartbeat could not renew its claim (the store out of reach): interrupted, written
  once the store is back, fenced by its token (the outcome is "lost" only when the store then
  says another runner took it over);
- ClaimLost, or a run whose heartbeat found its claim taken over: nothing is written (another
  runner owns the run now); the outcome is "lost".

Every other row releases the claim (the lifecycle's `end_run` does), so no ticket is left `running`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.errors import (
    BatchStopper,
    CheckCannotStart,
    CheckFailed,
    ClaimLost,
    CodingAgentError,
    MiddleError,
    RunInterrupted,
    StoreUnavailable,
)
from orchestrator.lifecycle.next_steps import advice
from orchestrator.running.run import Run

log = logging.getLogger("middle.policy")


@dataclass(frozen=True)
class Ending:
    """How a run ended on an exception, for the driver to report."""

    status: str  # the run's status: "interrupted" or "failed"; "lost": not this runner's to end
    reason: str
    resumable: bool
    propagate: bool  # not an outcome of this ticket alone (a bug, Ctrl-C, no model): raise it on


def end_on_exception(exc: BaseException, run: Run, *, fake: bool = False, auto_resume: bool = False,
                     stop: threading.Event | None = None, work_left: Callable[[], bool] = lambda: False) -> Ending:
    """End the run that `exc` stopped, as the policy above says.

    `auto_resume`: an interruption was no person's doing (a stopped `middle worker`). `stop`:
    while the store is out of reach, give up marking the run interrupted once it is set.
    `work_left()`: whether the ticket's worktree holds work (a turn that failed after writing). The
    run's events that wait for the store are written before its end is recorded.
    """
    if run.outage and run.lost.is_set():
        # The store was out of reach past two thirds of the lease (no runner took the run over as
        # far as this one knows): interrupted, written once the store is back, unless the store
        # then says another runner holds it.
        reason = (f"the run stopped because the store was out of reach ({run.lost_why}); "
                  f"{advice('interrupted', run.ticket_id, fake=fake)}")
        if _interrupt_when_reachable(run, reason, stop, after_outage=True):
            return Ending("interrupted", reason, True, propagate=isinstance(exc, KeyboardInterrupt))
        return Ending("lost", f"the run of ticket {run.ticket_id} was taken over by another runner while the "
                      "store was out of reach: that runner continues it", True, propagate=False)
    if isinstance(exc, ClaimLost) or run.lost.is_set():
        # Another runner holds the run now (or may, once the lease runs out): it is theirs to
        # end. Nothing more of it is written here.
        why = run.lost_reason(str(exc))
        return Ending("lost", why, True, propagate=isinstance(exc, KeyboardInterrupt))
    try:
        return _end(exc, run, fake=fake, auto_resume=auto_resume, stop=stop, work_left=work_left)
    except ClaimLost as lost:  # taken over while this runner was ending it
        return Ending("lost", run.lost_reason(str(lost)), True, propagate=False)


def _end(exc: BaseException, run: Run, *, fake: bool, auto_resume: bool,
         stop: threading.Event | None, work_left: Callable[[], bool]) -> Ending:
    store, ticket_id = run.store, run.ticket_id
    if not isinstance(exc, StoreUnavailable):
        run.events.flush(wait=True)  # (the outage case flushes once the store is back, in _interrupt_when_reachable)
    if isinstance(exc, StoreUnavailable):
        # The shared store went away mid-run (a restart): nothing is wrong with the ticket,
        # so it is interrupted, and any worker continues it once the store is back.
        reason = (f"the run stopped because the store was out of reach: {exc}; "
                  f"{advice('interrupted', ticket_id, fake=fake)}")
        # (the heartbeat may give the claim up while this waits: still this run's end to write)
        if _interrupt_when_reachable(run, reason, stop, after_outage=True) or not run.lost.is_set():
            return Ending("interrupted", reason, True, propagate=False)
        return Ending("lost", f"the run of ticket {ticket_id} was taken over by another runner while the store "
                      "was out of reach: that runner continues it", True, propagate=False)
    if isinstance(exc, BatchStopper):
        # Nothing this run did can be kept when no turn finished: back to the backlog, so one
        # `middle run` picks it up once the key or network is fixed.
        # (a turn that wrote, then met it, left work: failed and resumable, so `middle resume`
        # continues it where a new run would refuse to delete it)
        untouched = (run.fresh and not any(t["status"] == "done" for t in store.list_turns(run_id=run.run_id))
                     and not work_left())
        run.fail(str(exc), resumable=not untouched, ticket_status="pending" if untouched else None)
        return Ending("failed", str(exc), not untouched, propagate=True)
    if isinstance(exc, CheckCannotStart) and not auto_resume and _before_any_work(run):
        # The user's own check command is wrong: said as their mistake, the ticket left as it was.
        # (Not on a worker, which would claim the pending ticket again at once, and again: there
        # it ends failed, as the next row says, and the board shows why.)
        run.fail(str(exc), resumable=False, ticket_status="pending")
        return Ending("failed", str(exc), False, propagate=True)
    if isinstance(exc, CheckFailed):
        run.fail(str(exc), resumable=True, check_failed=True)
        return Ending("failed", str(exc), True, propagate=False)
    if isinstance(exc, MiddleError):
        # The checkpoint stays before the failed node, so `middle resume` retries from there; a
        # worker does so by itself when Claude Code's turn crashed or timed out (passing).
        if auto_resume and _turn_crashed(exc, run):
            run.fail(str(exc), resumable=True, transient=True)
        else:
            run.fail(str(exc), resumable=True)
        return Ending("failed", str(exc), True, propagate=False)
    if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, SIGTERM, SIGHUP (RunInterrupted), a stop()
        why = exc.why if isinstance(exc, RunInterrupted) else "interrupted by the user"
        reason = f"{why}: {advice('interrupted', ticket_id, fake=fake)}"
        run.interrupt(reason, auto_resume=auto_resume)
        return Ending("interrupted", reason, True, propagate=True)
    # A bug: still end the run, so no claim or 'running' is left behind.
    reason = (f"internal error: {type(exc).__name__}: {exc}; "
              f"{advice('failed-resumable', ticket_id, fake=fake)}")
    run.fail(reason, resumable=True)
    return Ending("failed", reason, True, propagate=True)


def _before_any_work(run: Run) -> bool:
    """Whether the run stopped before doing anything a ticket keeps: a new run of its first round
    (a review round's ticket was complete: it must not go back to pending) with no turn done."""
    return (run.fresh and run.store.round_of(run.run_id) <= 1
            and not any(t["status"] == "done" for t in run.turns()))


def _turn_crashed(exc: BaseException, run: Run) -> bool:
    """Whether Claude Code ran a turn that ended in error (a crash, a timeout, the model's API
    failing): passing, unlike Claude Code that cannot start or a decision to fail."""
    if not isinstance(exc, CodingAgentError):
        return False
    turns = run.turns()
    return bool(turns) and turns[-1]["status"] == "error"


def _interrupt_when_reachable(run: Run, reason: str, stop: threading.Event | None, *,
                              after_outage: bool = False) -> bool:
    """Mark the run interrupted (auto-resumed), waiting for the store that just went away, after
    the run's events that waited for it; whether it was. Stopped meanwhile, it stays `running`:
    once its lease runs out any runner resumes it. Taken over meanwhile (the outage outlasted the
    lease), the store refuses the end (the claim's token changed) and the new owner ends it."""
    while True:
        try:
            if not run.events.flush(wait=True):
                raise StoreUnavailable("the run's waiting events could not be written yet")
            return run.interrupt(reason, auto_resume=True, after_outage=after_outage)
        except ClaimLost:
            return False
        except StoreUnavailable as exc:  # each try waits [store] reconnect_s
            if stop is not None and stop.is_set():
                return False
            log.warning("ticket %s: waiting for the store to mark its run interrupted (%s)", run.ticket_id, exc)
