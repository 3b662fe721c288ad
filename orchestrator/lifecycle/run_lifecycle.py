"""A run's start and end in the store: who may start it (the refusals, the atomic claim) and the
one owner of its end (status, run record, claim, `run_end` event, then the plugin hook).

The graph's finalize and fail nodes, the runner's error and interrupt paths, the server's shutdown
and crash paths, and the LangGraph Server entry all end runs here. The store writes the record in
one transaction and refuses a run that already ended, so the hook fires once per run end.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from orchestrator.killpoints import point
from orchestrator.lifecycle.next_steps import advise
from orchestrator.plugins.manager import DEFAULT_PLUGINS, call_hook
from tickets.claims import owner_died
from tickets.deps import SATISFIED

if TYPE_CHECKING:
    from tickets.store import TicketStore

log = logging.getLogger("middle.lifecycle")


class RunLifecycle:
    """Ends runs on one ticket store, calling the lifecycle hooks of one plugin registry."""

    def __init__(self, store: TicketStore, hooks: Any = None, config: Any = None):
        self.store, self.hooks, self.config = store, hooks, config

    def _retry(self) -> tuple[int, float]:
        """(most retries, first wait in seconds) of a run something passing stopped."""
        run = getattr(self.config, "run", None)
        return (run.retries, run.retry_wait_s) if run is not None else (3, 5.0)

    def complete(self, ticket_id: str, run_id: str, summary: str, *, say: Callable[[str], None] | None = None,
                 token: int | None = None, on_ended: Callable[[], None] | None = None, **event: Any) -> bool:
        """End a run as complete; `say`: where the hooks' notes go (the run's log). `token`: the
        run owner's claim token (a stale owner is refused with ClaimLost, changing nothing);
        `on_ended`: called once the end is stored, before the hooks run."""
        ended = self.store.end_run(ticket_id, run_id, "complete", None, ticket_reason=summary or None,
                                   event=event, token=token, pr_due=self._pr_due(run_id))
        if on_ended is not None:
            on_ended()
        point("run.hooks")  # (the run's pr_due and hooks_due say what is left: `middle sync` does it)
        if ended:
            self.end_hooks(ticket_id, run_id, "on_ticket_complete", summary, say=say)
        return ended

    def end_hooks(self, ticket_id: str, run_id: str, hook: str, said: str, *,
                  say: Callable[[str], None] | None = None, built_in: bool = True) -> int:
        """The run's end hook (`on_ticket_complete` with its summary, `on_ticket_failed` with its
        reason: `said`) of each plugin not recorded as run for it (`built_in=False`: nor the
        built-in plugins, whose work has its own record), each recorded right after it
        (kill point `run.hooked` between), then the run's hooks_due cleared (how many ran): a kill skips none
        (`middle sync` runs the rest, end_hooks.catch_up), and repeats at most the one it cut off."""
        called: list[str] = []

        def ran(plugin: str) -> None:
            point("run.hooked")
            self.store.mark_end_hook(run_id, plugin)
            called.append(plugin)

        args: dict[str, Any] = {"ticket": self.store.get_ticket(ticket_id), "run_id": run_id}
        if hook == "on_ticket_complete":
            args.update(summary=said, config=self.config, store=self.store,
                        say=say or (lambda msg: log.info("%s", msg)))
        else:
            args.update(reason=said)
        skip = self.store.end_hooks_ran(run_id) | (set() if built_in else set(DEFAULT_PLUGINS))
        call_hook(self.hooks, hook, skip=skip, ran=ran, **args)
        point("run.hooks_recorded")  # (killed here, the next catch-up finds them all recorded and clears)
        self.store.clear_hooks_due(run_id)
        return len(called)

    def _pr_due(self, run_id: str) -> str | None:
        """What the complete run's end asks of its pull request, recorded in the end's transaction
        (runs.pr_due) so that a kill before the hook does it leaves it for `middle sync`
        (github.pull_updates.catch_up): "update" its open one (a review round), "open" one
        (`[run] on_complete = "pr"` as it is now: a ticket that completed before it was set asks
        nothing)."""
        if self.config is None:  # (no hooks with a config to act: nothing asked)
            return None
        run = self.store.get_run(run_id)
        if run.get("pr_url") and run.get("pr_state") == "open":
            return "update"
        return "open" if getattr(getattr(self.config, "run", None), "on_complete", "none") == "pr" else None

    def fail(self, ticket_id: str, run_id: str, reason: str, *, resumable: bool = False,
             ticket_status: str | None = None, check_failed: bool = False, transient: bool = False,
             kept_work: bool = False, token: int | None = None,
             on_ended: Callable[[], None] | None = None) -> bool:
        """End a run as failed. `ticket_status="pending"` returns the ticket to the backlog (a
        model that cannot be reached before anything was done); `check_failed`: its check still
        failed after its rounds (its work is on its branch: feedback starts a round on it);
        `transient`: something passing stopped it (a Claude Code turn that crashed or timed out):
        a worker retries it, a bounded number of times with growing waits ([run] retries).
        `kept_work`: the graph ended it (the middle agent gave up, a limit) with its work committed
        on its branch: feedback starts a round on it, and a resume asks the middle agent again."""
        event: dict[str, Any] = {"resumable": resumable}
        if check_failed:
            event["check_failed"] = True
        if kept_work:
            event["kept_work"] = True
        if transient:
            event["transient"] = True
        ended = self.store.end_run(ticket_id, run_id, "failed", reason, ticket_status=ticket_status, event=event,
                                   token=token, retry=self._retry() if transient else None)
        if on_ended is not None:
            on_ended()
        point("run.hooks")
        if ended:
            self.end_hooks(ticket_id, run_id, "on_ticket_failed", reason)
        return ended

    def interrupt(self, ticket_id: str, run_id: str, reason: str, *, auto_resume: bool = False,
                  token: int | None = None, on_ended: Callable[[], None] | None = None) -> bool:
        """Ctrl-C, SIGTERM, SIGHUP or a server shutdown: resumable, no hook (nothing ended for good).

        `auto_resume`: no person stopped it (a stopped `middle worker`, the shared store out of
        reach for a moment), so any worker continues it; a ticket a person interrupted waits for
        that person (`middle resume`): any worker resumes it, as a retry ([run] retries)."""
        ended = self.store.end_run(ticket_id, run_id, "interrupted", reason,
                                   event={"resumable": True, "auto_resume": auto_resume}, token=token,
                                   retry=self._retry() if auto_resume else None)
        if on_ended is not None:
            on_ended()
        return ended


def catch_up_end_hooks(lifecycle: RunLifecycle, say: Callable[[str], None], ended_s_ago: float | None = None) -> int:
    """`middle sync`: run the end hooks a kill skipped (a run whose end is stored with hooks_due
    set): each plugin's not recorded as run, then the run's hooks_due cleared. The built-in
    plugins are not called here: their work has its own record (a pull request's `pr_due`, done by
    github.pull_updates.catch_up; the completion doc's index, done before the end). How many runs.
    Only runs that ended `ended_s_ago` seconds ago or more (default: a lease, `[run] lease_s`), so
    the hooks a live process is running still are not run twice."""
    if ended_s_ago is None:
        run = getattr(lifecycle.config, "run", None)
        ended_s_ago = run.lease_s if run is not None else 120.0
    due = lifecycle.store.hooks_due(ended_s_ago)
    for ticket_id, run_id, hook in due:
        if hook == "on_ticket_failed":
            said = lifecycle.store.get_run(run_id).get("reason") or ""
        else:  # (the summary is the complete ticket's reason, stored with the end)
            said = lifecycle.store.get_ticket(ticket_id).status_reason or ""
        if lifecycle.end_hooks(ticket_id, run_id, hook, said, say=say, built_in=False):
            say(f"ran the {hook} hooks a stopped process left of run {run_id} (ticket {ticket_id})")
    return len(due)


def file_gone(ticket: Any) -> str | None:
    """The ticket file of a discarded ticket when it is gone (a sync discarded the ticket for
    it), else None: the ticket cannot run again, and advice must not send anyone to run it."""
    source = ticket.source or ""
    if ticket.status.value != "discarded" or not source.startswith("/") or Path(source).exists():
        return None
    return source


def _step(store: TicketStore, ticket_id: str, dep: str) -> str:
    """What to do about one unmet dependency: its own next step, or, when its file is gone (a
    ticket of a dependency cycle deleted, say), dropping it from depends_on: never a command
    that would be refused in turn."""
    gone = file_gone(store.get_ticket(dep))
    if gone:
        return (f"{dep}'s file {gone} is gone: remove {dep!r} from the depends_on of {ticket_id!r}, "
                "or put the file back")
    return f"for {dep}: {advise(store, dep)}"


# `middle run ID` starts tickets in these states; a complete one only when asked (`--rerun`).
RUNNABLE = ("pending", "failed", "reverted", "discarded")


def start_refusal(store: TicketStore, ticket_id: str, *, rerun: bool = False, dependencies: str = "merged",
                  in_batch: Any = ()) -> str | None:
    """Why a new run of the ticket must not start now, or None when it may (before the claim).

    The claim itself re-checks status and claims atomically; this says *why* in words, and checks
    what the claim cannot: dependencies, and an unmerged change that a rerun would throw away.
    Dependencies named in `in_batch` are not counted (a batch starts them first).
    """
    from tickets.deps import waiting_for

    ticket = store.get_ticket(ticket_id)
    status = ticket.status.value
    gone = file_gone(ticket)
    if gone:
        return (f"ticket {ticket_id!r} was discarded ({ticket.status_reason or 'its file is gone'}): "
                f"put {gone} back in the ticket folder to run it again (a sync makes it pending)")
    run = store.latest_run(ticket_id)
    if status in ("complete", "conflict") and run and run.get("head_commit") and not run.get("merge_commit"):
        return f"ticket {ticket_id!r} has an unmerged change on {run.get('branch')}: {advise(store, ticket_id, 'run')}"
    if status in ("complete", "merged") and not rerun:
        return f"ticket {ticket_id!r} is already {status}: {advise(store, ticket_id, 'run')}"
    if status in ("interrupted", "running"):  # an unfinished run, here or elsewhere: resume, or wait
        return why_not_claimed(store, ticket_id)

    def status_of(tid: str) -> str | None:
        try:
            return store.get_ticket(tid).status.value
        except Exception:
            return None

    deps = [d for d in ticket.depends_on if d not in set(in_batch)]
    waits = waiting_for(ticket.replace(depends_on=deps), status_of, dependencies)  # type: ignore[arg-type]
    if not waits:
        return None
    unmet = [d for d in deps if status_of(d) not in SATISFIED[dependencies]]
    steps = [_step(store, ticket_id, d) if status_of(d) is not None
             else f"{d} names no ticket: fix the id in depends_on" for d in unmet]
    mode = (" (or set [run] dependencies = \"complete\" to start from a complete one)"
            if dependencies == "merged" and any("merged" in w for w in waits) else "")
    return f"ticket {ticket_id!r} waits for {', '.join(waits)}; {'; '.join(steps)}{mode}"


@dataclass(frozen=True)
class ClaimedRun:
    """A run this process holds the claim of: what a driver drives."""

    ticket_id: str
    run_id: str
    fresh: bool = True  # starts from the ticket (a new run, or one that died before its first checkpoint)


def try_claim(store: TicketStore, ticket_id: str, *, rerun: bool, dependencies: str, lease_s: float,
              before_claim: Callable[[Any], None] | None = None) -> tuple[ClaimedRun | None, str]:
    """Claim a new run of the ticket atomically: (the claimed run, "") or (None, why not and what to do).

    `before_claim(ticket)` runs once the ticket may start, before anything is claimed (a check
    whose error must leave no run behind)."""
    refusal = start_refusal(store, ticket_id, rerun=rerun, dependencies=dependencies)
    if refusal is None:
        if before_claim is not None:
            before_claim(store.get_ticket(ticket_id))
        allowed = RUNNABLE + (("complete", "merged") if rerun else ())
        run_id = store.claim_new_run(ticket_id, allowed, lease_s=lease_s)
        if run_id is not None:
            return ClaimedRun(ticket_id, run_id), ""
        refusal = why_not_claimed(store, ticket_id)
    return None, refusal


def why_not_claimed(store: TicketStore, ticket_id: str) -> str:
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
