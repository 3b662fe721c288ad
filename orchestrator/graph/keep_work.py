"""A failed ticket's work, kept: whatever ended the run (its check past its rounds, the middle
agent giving up, a turn or cost limit), what the turns changed is committed on the ticket's
branch (and pushed when shared), so `middle feedback` and `middle resume` continue from it and a
new `middle run` refuses to throw it away (orchestrator.workspace.leftover)."""

from __future__ import annotations

from typing import Any

from orchestrator.graph.context import TicketContext
from orchestrator.graph.worktree import drop_work_in_progress, fenced_push
from orchestrator.killpoints import point
from orchestrator.workspace import Workspace
from orchestrator.workspace.git import commit_message


def keep_work(ctx: TicketContext, state: Any, t: dict[str, Any], why: str) -> str | None:
    """Commit the worktree's changes on the ticket's branch with `why` in the message; the
    branch's commit when it holds work of the ticket (this run's or an earlier round's), else None
    (nothing changed, or no worktree: a ticket run in place keeps its edits where they are)."""
    ws = t.get("workspace")
    if not ws or ctx.worktrees is None:
        return None
    summary = ((state.get("decision") or {}).get("summary") or "").strip()
    message = commit_message(t["title"], (summary + "\n\n" if summary else "") + f"Work in progress: {why}")
    workspace = Workspace.from_dict(ws)
    ctx.run.check()  # a stale owner (the run was taken over) commits nothing
    sha, changes = ctx.worktrees.commit(workspace, message)
    point("branch.committed")  # (a takeover commits again: an existing commit is found as is)
    ctx.run.set_fields(head_commit=sha, changes=changes)
    if sha and ctx.worktrees.shared:
        worktrees = ctx.worktrees
        # As the commit node pushes: a compare-and-swap, once more when a stale owner's push landed
        fenced_push(ctx, lambda: worktrees.push(workspace))
        point("branch.pushed")
    if sha and state.get("wip"):
        drop_work_in_progress(ctx, workspace, t["id"])  # the branch holds it now (fenced, a compare-and-swap)
    return sha


def during_check(state: Any) -> str:
    """When the run ended while the middle agent was correcting a failed check: which, said in
    the failure (`check_failed_line`, set by orchestrator.graph.checking); else ''."""
    if state.get("check_passed") is not False:
        return ""
    line = state.get("check_failed_line") or "the project's check failed"
    if state.get("check_stopped"):
        return f"when the check failed, so no correction was started ({line})"
    if not state.get("corrections"):
        return ""
    return f"during correction {state['corrections']} of the check ({line})"
