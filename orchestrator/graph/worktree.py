"""The run's worktree, made or found again: what load_ticket and a takeover both start from.

Apart from nodes.py so that takeover.py (which nodes.py uses) reaches it without a circle.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from orchestrator.errors import GitError, TicketError
from orchestrator.graph.context import TicketContext
from orchestrator.workspace import Workspace, branch_name, wip
from orchestrator.workspace.worktrees import PushRefused
from tickets.model import RunRow

log = logging.getLogger("middle.graph")


def run_workspace(ctx: TicketContext, ticket: Any, run_id: str) -> dict[str, Any] | None:
    """The run's worktree: made for a new run, found again when this node re-runs on resume."""
    if ctx.worktrees is None:
        ctx.run.set_fields(isolation="none")
        return None
    run = ctx.run.record()
    # This run's worktree, when this runner made it (a run taken over from a dead worker on
    # another machine or clone starts a worktree of its own; completed turns are not re-run).
    if ctx.worktrees.has_at(run["worktree"], run["head_commit"]):
        return _found(run, ticket)
    if run["isolation"] == "worktree" and run["branch"] and ctx.run.round() > 1:
        return _continue_round(ctx, ticket, run)
    deps = []
    if ctx.dependencies == "complete":  # merged ones are in the base branch already
        deps = [branch_name(d) for d in ticket.depends_on
                if ctx.store.get_ticket(d).status.value == "complete"]
    ws = ctx.worktrees.prepare(ticket.id, ticket.project_path, start_from=deps)
    ctx.run.set_fields(isolation="worktree", repo=ws.repo, base_branch=ws.base_branch,
                             base_commit=ws.base_commit, branch=ws.branch, worktree=ws.path)
    ctx.say(f"working on branch {ws.branch} in {ws.path} (from {ws.origin()})")
    return ws.to_dict()


def _continue_round(ctx: TicketContext, ticket: Any, run: RunRow) -> dict[str, Any]:
    """A review round whose ticket's worktree is not here (another machine ran the round before,
    or it was removed): the branch as pushed to the shared repository, holding the last round's
    commit, in a new worktree here (orchestrator.running.feedback checked that before the claim)."""
    assert ctx.worktrees is not None
    begun = recorded_workspace(run)
    head = run["head_commit"] or begun.base_commit
    adopted = ctx.worktrees.adopt(ticket.id, ticket.project_path, begun, holding=head)
    if adopted is None:  # rewritten on the shared repository since the feedback was accepted
        raise TicketError(f"ticket {ticket.id}'s branch {run['branch']} on the shared repository no "
                          f"longer holds its last commit {head[:10]}, so this round cannot continue it "
                          f"here: push {run['branch']} with that commit, then ask again with "
                          f"`middle feedback {ticket.id}`")
    new, source = adopted
    ctx.run.set_fields(repo=new.repo, worktree=new.path)
    ctx.say(f"round {ctx.run.round()}: the ticket's worktree {run['worktree']} is not here "
            f"(removed, or on another machine), so the round continues {new.branch} from {source} in {new.path}")
    return _found({**run, "repo": new.repo, "worktree": new.path}, ticket)


def recorded_workspace(run: RunRow | dict[str, Any]) -> Workspace:
    """The worktree a run records (a run with isolation "worktree" records every field)."""
    fields = {k: run.get(k) for k in ("repo", "worktree", "branch", "base_branch", "base_commit")}
    missing = sorted(k for k, v in fields.items() if not v)
    if missing:
        raise TicketError(f"run {run['id']} records no {', '.join(missing)}: its worktree cannot be found; "
                          f"start the ticket again with `middle run {run['ticket_id']} --rerun`")
    return Workspace(repo=str(fields["repo"]), path=str(fields["worktree"]), cwd=str(fields["worktree"]),
                     branch=str(fields["branch"]), base_branch=str(fields["base_branch"]),
                     base_commit=str(fields["base_commit"]))


def _found(run: RunRow | dict[str, Any], ticket: Any) -> dict[str, Any]:
    """The run's recorded worktree as a workspace dict."""
    ws = recorded_workspace(run)
    return Workspace.from_dict({**ws.to_dict(), "cwd": _cwd(ws, Path(ticket.project_path))}).to_dict()


def _cwd(ws: Workspace, project: Path) -> str:
    repo = Path(ws.repo)
    rel = project.resolve().relative_to(repo) if project.resolve() != repo else Path()
    return str(Path(ws.path) / rel)


def save_work_in_progress(ctx: TicketContext, ticket: dict[str, Any], turn_no: int,
                          result: wip.TurnResult | None = None) -> str | None:
    """After a turn, before its end is stored: the worktree's state (and the turn's result) to
    the ticket's work-in-progress ref, committed here first (no store call: it survives an
    outage) and then pushed when shared, so no store record says the turn is done before its
    work is where a takeover anywhere finds it. The commit, or None (no worktree, or git
    failed: said, and the run goes on)."""
    ws = ticket.get("workspace")
    if not ws or ctx.worktrees is None:
        return None
    workspace = Workspace.from_dict(ws)
    try:
        commit = wip.commit_local(ctx.worktrees, workspace, ticket["id"], ctx.run.run_id, turn_no, result)
    except GitError as exc:
        ctx.say(f"could not save turn {turn_no}'s work in progress ({exc}): a takeover on another machine "
                "would start from the branch as last pushed")
        return None
    assert ctx.worktrees is not None
    worktrees = ctx.worktrees
    try:
        fenced_push(ctx, lambda: wip.push(worktrees, workspace, ticket["id"], commit))
    except GitError as exc:
        ctx.say(f"could not push turn {turn_no}'s work in progress ({exc}): a takeover on another machine "
                "would start from the branch as last pushed")
    return commit


def fenced_push(ctx: TicketContext, push: Any) -> None:
    """A push to the shared repository by the run's owner: the token is read just before, and
    the push is a compare-and-swap (orchestrator.workspace.worktrees.push_ref). Refused because
    another runner pushed since: if this one still holds the run (the other was a stale owner
    whose push landed late), once more from what is there now; else ClaimLost."""
    ctx.run.check()  # a stale owner pushes nothing
    try:
        push()
    except PushRefused as exc:
        ctx.run.check()
        assert ctx.worktrees is not None
        ctx.worktrees.forget(exc.ref)
        log.warning("ticket %s: %s; this runner still holds the run, so it pushes again", ctx.run.ticket_id, exc)
        push()


def saved_turn(ctx: TicketContext, ticket: dict[str, Any], turn_no: int) -> wip.TurnResult | None:
    """The result of a turn that finished and whose work was saved, but whose end was never
    stored (the runner died, or the store was out of reach, in between): from the run's
    work-in-progress commit of that turn, here or as pushed. None when there is none."""
    ws = ticket.get("workspace")
    if not ws or ctx.worktrees is None:
        return None
    try:
        return wip.turn_result(ctx.worktrees, Path(ws["repo"]), ticket["id"], ctx.run.run_id, turn_no)
    except GitError as exc:
        log.warning("ticket %s: looking for turn %d's saved result failed: %s", ticket["id"], turn_no, exc)
        return None


def drop_work_in_progress(ctx: TicketContext, ws: Workspace, ticket_id: str) -> None:
    assert ctx.worktrees is not None
    ctx.run.check()
    wip.drop(ctx.worktrees, ws, ticket_id)  # (a compare-and-swap: what another runner pushed stays)


def refuse_lost_work(ctx: TicketContext, state: Any, ws: Workspace) -> None:
    """The commit found no change: refused (the run fails, resumable) when the last turn's work in
    progress held edits this worktree does not have (a takeover that could not restore them), so
    a ticket is never complete without its commit."""
    saved = state.get("wip")
    if not saved:
        return
    had = wip.changed(ws.repo, saved)
    if had is False:
        return
    where = "is not in this clone" if had is None else "held edits this worktree does not have"
    raise GitError(f"the work in progress of ticket {state['ticket']['id']}'s last turn ({saved[:10]}) {where}: "
                   "the ticket is not completed without it. Resume it where that work is reachable (the shared "
                   f"repository's {wip.wip_ref(state['ticket']['id'])}), or run it again with `middle run --rerun`")
