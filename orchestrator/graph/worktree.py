"""The run's worktree, made or found again: what load_ticket and a takeover both start from.

Apart from nodes.py so that takeover.py (which nodes.py uses) reaches it without a circle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.errors import TicketError
from orchestrator.graph.context import TicketContext
from orchestrator.workspace import Workspace, branch_name


def run_workspace(ctx: TicketContext, ticket: Any, run_id: str) -> dict[str, Any] | None:
    """The run's worktree: made for a new run, found again when this node re-runs on resume."""
    if ctx.worktrees is None:
        ctx.store.set_run_fields(run_id, isolation="none")
        return None
    run = ctx.store.get_run(run_id)
    # This run's worktree, when this runner made it (a run taken over from a dead worker on
    # another machine or clone starts a worktree of its own; completed turns are not re-run).
    if ctx.worktrees.has_at(run.get("worktree"), run.get("head_commit")):
        return _found(run, ticket)
    if run.get("isolation") == "worktree" and run.get("branch") and ctx.store.round_of(run_id) > 1:
        return _continue_round(ctx, ticket, run)
    deps = []
    if ctx.dependencies == "complete":  # merged ones are in the base branch already
        deps = [branch_name(d) for d in ticket.depends_on
                if ctx.store.get_ticket(d).status.value == "complete"]
    ws = ctx.worktrees.prepare(ticket.id, ticket.project_path, start_from=deps)
    ctx.store.set_run_fields(run_id, isolation="worktree", repo=ws.repo, base_branch=ws.base_branch,
                             base_commit=ws.base_commit, branch=ws.branch, worktree=ws.path)
    ctx.say(f"working on branch {ws.branch} in {ws.path} (from {ws.origin()})")
    return ws.to_dict()


def _continue_round(ctx: TicketContext, ticket: Any, run: dict[str, Any]) -> dict[str, Any]:
    """A review round whose ticket's worktree is not here (another machine ran the round before,
    or it was removed): the branch as pushed to the shared repository, holding the last round's
    commit, in a new worktree here (orchestrator.running.feedback checked that before the claim)."""
    assert ctx.worktrees is not None
    head = run.get("head_commit") or run["base_commit"]
    begun = Workspace(repo=run["repo"], path=run["worktree"], cwd=run["worktree"], branch=run["branch"],
                      base_branch=run["base_branch"], base_commit=run["base_commit"])
    adopted = ctx.worktrees.adopt(ticket.id, ticket.project_path, begun, holding=head)
    if adopted is None:  # rewritten on the shared repository since the feedback was accepted
        raise TicketError(f"ticket {ticket.id!r}'s branch {run['branch']} on the shared repository no "
                          f"longer holds its last commit {head[:10]}, so this round cannot continue it "
                          f"here: push {run['branch']} with that commit, then ask again with "
                          f"`middle feedback {ticket.id}`")
    new, source = adopted
    ctx.store.set_run_fields(run["id"], repo=new.repo, worktree=new.path)
    ctx.say(f"round {ctx.store.round_of(run['id'])}: the ticket's worktree {run['worktree']} is not here "
            f"(removed, or on another machine), so the round continues {new.branch} from {source} in {new.path}")
    return _found({**run, "repo": new.repo, "worktree": new.path}, ticket)


def _found(run: dict[str, Any], ticket: Any) -> dict[str, Any]:
    """The run's recorded worktree as a workspace dict."""
    return Workspace.from_dict({**run, "path": run["worktree"],
                                "cwd": _cwd(run, Path(ticket.project_path))}).to_dict()


def _cwd(run: dict[str, Any], project: Path) -> str:
    repo = Path(run["repo"])
    rel = project.resolve().relative_to(repo) if project.resolve() != repo else Path()
    return str(Path(run["worktree"]) / rel)
