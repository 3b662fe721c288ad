"""`middle feedback ID "text"`: the human asks for changes to a ticket, any number of times.

The status flow of a review round:

    complete | conflict --feedback--> running (round n+1) --> complete | failed | interrupted
    failed in a round (for good) --feedback--> running (round n+1): the branch keeps the earlier work
    failed, its check still failing --feedback--> running (round n+1): its work is on the branch
    failed with its work kept (the agent gave up, a limit) --feedback--> running (round n+1), from it
    running | interrupted | failed (resumable) --feedback--> (stored) read at the run's next assess

A round is a run of its own (its own claim, limits, checkpoints and `middle resume`), on the
ticket's branch and worktree, started from the run before it (orchestrator.graph.rounds does the
graph's part). It runs on any machine of a team: where the ticket's worktree is not (another
machine ran it, or it was removed), the round takes the branch as pushed to the shared repository
into a worktree here. Anything else is refused with one line and nothing changed: an unknown
ticket, one that never ran, a merged, discarded or reverted one, empty feedback, a worktree not
here whose branch was never pushed (or was rewritten without the run's last commit).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.errors import GitError, TicketError
from orchestrator.killpoints import point
from orchestrator.lifecycle.next_steps import advise, situation
from tickets.rounds import FEEDBACK, MAX_FEEDBACK_CHARS, ROUND, STORED, Delivered

if TYPE_CHECKING:
    from tickets.model import RunRow
    from tickets.store import TicketStore

# Situations (orchestrator.lifecycle.next_steps) and what feedback does in them.
STARTS_ROUND = ("complete", "complete-empty", "in-place", "conflict", "failed-round", "failed-check",
                "failed-work")
WAITS_FOR_ASSESS = ("running", "stale", "interrupted", "failed-resumable")


def check(store: TicketStore, ticket_id: str, text: str, *, worktrees: Any = None,
          project_override: str | None = None) -> str:
    """ROUND or STORED for feedback on the ticket now; a TicketError saying why not and what to do.

    With `worktrees` (the runner that would run the round) also whether the round can continue
    the ticket's branch here: its worktree is here, or its branch was pushed to the shared
    repository with the run's last commit (the round then adopts it; see graph.worktree)."""
    if not text.strip():
        raise TicketError(f"the feedback for ticket {ticket_id!r} is empty: say what to change, e.g. "
                          f"`middle feedback {ticket_id} \"also handle empty input\"`")
    if len(text) > MAX_FEEDBACK_CHARS:
        raise TicketError(f"the feedback is {len(text)} characters long; keep it under {MAX_FEEDBACK_CHARS} "
                          "(put long material in a file in the repository and name it)")
    ticket = store.get_ticket(ticket_id)  # an unknown id: one clear error
    run = store.latest_run(ticket_id)
    if run is None:
        raise TicketError(f"ticket {ticket_id!r} has never run, so there is no change to give feedback "
                          f"on: {advise(store, ticket_id, 'feedback')}")
    now = situation(store, ticket_id)
    if now in WAITS_FOR_ASSESS:
        return STORED
    if now not in STARTS_ROUND:
        raise TicketError(f"ticket {ticket_id!r} is {ticket.status.value}: feedback continues a complete, "
                          f"conflicted or failed ticket that has work; {advise(store, ticket_id, 'feedback')}")
    if worktrees is not None and run.get("isolation") == "worktree" and \
            not worktrees.has_at(run.get("worktree"), run.get("head_commit")):
        _pushed(store, run, worktrees, Path(project_override or ticket.project_path))
    return ROUND


def _pushed(store: TicketStore, run: Mapping[str, Any], worktrees: Any, project: Path) -> None:
    """A round whose worktree is not here (another machine's, or removed) continues the branch
    here (its worktree was removed) or as pushed to the shared repository, when it holds the
    run's last commit; else a TicketError."""
    ticket_id, branch, head = run["ticket_id"], run.get("branch") or "", run.get("head_commit")
    gone = (f"ticket {ticket_id}'s worktree {run.get('worktree') or '(none recorded)'} is not on this "
            "machine (removed, or the ticket ran on another one)")
    if worktrees.has(run.get("worktree")):
        gone = (f"ticket {ticket_id}'s worktree {run['worktree']} here is behind its branch (another "
                f"machine continued it to {(head or '')[:10]})")
    if not project.is_dir():
        raise TicketError(f"{gone} and neither is its project {project}, so a round cannot continue its "
                          "branch here: give the feedback on a machine that has the project")
    if head and worktrees.local_holding(project, branch, head):
        return  # the worktree was removed, the branch is here: the round makes a new worktree of it
    if not worktrees.shared:
        raise TicketError(f"{gone}, its branch {branch} is not here either, and no shared repository holds "
                          "it ([project] repo_url is not set), so a round cannot continue it: give the "
                          "feedback on the machine that ran it, or run the ticket again on purpose with "
                          f"`middle run --rerun {ticket_id}`")
    try:
        tip = worktrees.pushed_holding(project, branch, head) if head else None
    except GitError as exc:  # not a repository, or the shared one cannot be reached
        why = " ".join(str(exc).split()).rstrip(".")
        raise TicketError(f"{gone} and its branch {branch} could not be read from the shared repository "
                          f"({why}), so a round cannot continue it here: fix that and ask again, or give "
                          "the feedback on the machine that ran it") from None
    if tip is None:
        raise TicketError(f"{gone} and its branch {branch} on the shared repository does not hold the "
                          f"run's last commit {(head or 'none')[:10]} (never pushed, or rewritten since), "
                          "so a round cannot continue it here: give the feedback on the machine that ran "
                          f"it, or push {branch} from there")


def store_for_run(store: TicketStore, ticket_id: str, text: str, *, by: str | None = None) -> str | None:
    """Keep the feedback for the ticket's run in progress; what to tell the human. None, storing
    nothing, when that run completed meanwhile: the feedback then opens the next round
    (`deliver`)."""
    run = _latest(store, ticket_id)
    if store.add_feedback(ticket_id, run["id"], text.strip(), by) is None:
        return None
    return stored_message(store, ticket_id)


def _latest(store: TicketStore, ticket_id: str) -> RunRow:
    """The ticket's latest run (`check` said it has one: feedback goes to a run or its branch)."""
    run = store.latest_run(ticket_id)
    if run is None:
        raise TicketError(f"ticket {ticket_id} has no run: `middle run {ticket_id}` starts one")
    return run


def stored_message(store: TicketStore, ticket_id: str) -> str:
    if situation(store, ticket_id) == "running":
        return (f"feedback stored for ticket {ticket_id}'s run in progress: the middle agent reads it "
                "at its next assessment")
    return (f"feedback stored for ticket {ticket_id}'s unfinished run: the middle agent reads it at the "
            f"run's next assessment; {advise(store, ticket_id)}")


def undelivered(store: TicketStore, run_id: str) -> list[str]:
    """Feedback sent during the run after its last assessment (the run completed without reading
    it): the runner opens the next round with it (`continue_with_undelivered`)."""
    events = store.feedback(run_id)
    seen = max([e["id"] for e in events if e.get("round")] +
               [int((t.get("decision") or {}).get("feedback_seen") or 0) for t in store.list_turns(run_id=run_id)],
               default=0)
    return [e["text"] for e in events if e["id"] > seen and not e.get("round")]


ATTEMPTS = 3  # a ticket's situation changes under a feedback at most a few times (a run ends, a round starts)


def deliver(store: TicketStore, ticket_id: str, text: str, *, lease_s: float, by: str | None = None) -> Delivered:
    """Check, then deliver the feedback exactly once: a new round claimed here (`ROUND`: the
    caller drives it), or stored for the run in progress (`STORED`), whichever the ticket is in
    when the store writes it. Several people (or processes) giving feedback at once: one starts
    the round, the others' words are stored for it and read at its first assess."""
    for _ in range(ATTEMPTS):
        if check(store, ticket_id, text) == STORED:
            run = _latest(store, ticket_id)
            event = store.add_feedback(ticket_id, run["id"], text.strip(), by)
            if event is not None:
                return Delivered(STORED, run["id"], event)
            continue  # that run completed meanwhile: open the next round
        previous = _latest(store, ticket_id)
        delivered = store.claim_round(ticket_id, text.strip(), lease_s=lease_s,
                                      carry=undelivered(store, previous["id"]), by=by)
        if delivered is not None:
            if delivered.kind == ROUND:
                # Killed here, the round is claimed by a dead process with its feedback stored and
                # no checkpoint: `middle resume` starts it from its input (and more feedback waits for it).
                point("round.claimed")
            return delivered
    claim = store.get_claim(ticket_id)
    who = f" by {claim.describe()}" if claim is not None else ""
    raise TicketError(f"ticket {ticket_id!r} could not take the feedback: it is "
                      f"{store.get_ticket(ticket_id).status.value}{who} now and kept changing; "
                      f"{advise(store, ticket_id, 'feedback')}")


def continue_with_undelivered(store: TicketStore, ticket_id: str, run_id: str, *, lease_s: float) -> Delivered | None:
    """After a run completed: feedback that reached it after its last assessment opens the next
    round at once (claimed here; the caller drives it), so no accepted feedback waits for the
    next one. None when there is none, or another process opened a round meanwhile (its round
    carries these words: `deliver` computes them after the run's end)."""
    pending = undelivered(store, run_id)
    if not pending:
        return None
    following = store.claim_round(ticket_id, pending[-1], lease_s=lease_s, carry=pending[:-1], or_store=False)
    if following is not None:
        point("round.claimed")
    return following


def rounds_of(store: TicketStore, ticket_id: str) -> dict[str, dict[str, Any]]:
    """run id -> {"round", "feedback": [events]} for `middle log` and the ticket page."""
    return {run["id"]: {"round": store.round_of(run["id"]), "feedback": store.feedback(run["id"])}
            for run in store.list_runs(ticket_id)}


__all__ = ["FEEDBACK", "ROUND", "STORED", "Delivered", "check", "continue_with_undelivered", "deliver",
           "rounds_of", "store_for_run", "stored_message", "undelivered"]
