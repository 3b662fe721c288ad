"""The run's worktree, made or found again: what load_ticket and a takeover both start from.

Apart from nodes.py so that takeover.py (which nodes.py uses) reaches it without a circle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    if run.get("worktree") and Path(run["worktree"]).is_dir() and \
            Path(run["worktree"]).parent == ctx.worktrees.root:
        return Workspace.from_dict({**run, "path": run["worktree"],
                                    "cwd": _cwd(run, Path(ticket.project_path))}).to_dict()
    deps = []
    if ctx.dependencies == "complete":  # merged ones are in the base branch already
        deps = [branch_name(d) for d in ticket.depends_on
                if ctx.store.get_ticket(d).status.value == "complete"]
    ws = ctx.worktrees.prepare(ticket.id, ticket.project_path, start_from=deps)
    ctx.store.set_run_fields(run_id, isolation="worktree", repo=ws.repo, base_branch=ws.base_branch,
                             base_commit=ws.base_commit, branch=ws.branch, worktree=ws.path)
    ctx.say(f"working on branch {ws.branch} in {ws.path} (from {ws.base_branch} at {ws.base_commit[:10]})")
    return ws.to_dict()


def _cwd(run: dict[str, Any], project: Path) -> str:
    repo = Path(run["repo"])
    rel = project.resolve().relative_to(repo) if project.resolve() != repo else Path()
    return str(Path(run["worktree"]) / rel)
