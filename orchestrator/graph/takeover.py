"""A run continued in another clone than the one it began in (a dead worker's machine).

The checkpoint's ticket snapshot names the paths of the machine that began the run; they are
not trusted here. The run gets a worktree in this runner's own clone, from the ticket's branch
as pushed to the shared repository (else the commit it started from), and Claude Code, whose
session lives on the other machine, is told what the earlier turns did.
"""

from __future__ import annotations

from typing import Any

from orchestrator.graph.context import TicketContext
from orchestrator.graph.state import TicketState
from orchestrator.graph.worktree import run_workspace
from orchestrator.workspace import Workspace, wip

RECAP_CHARS = 1500  # of each earlier response quoted to the new session


def _ours(ctx: TicketContext, path: str | None) -> bool:
    assert ctx.worktrees is not None
    return ctx.worktrees.has(path)


def local_ticket(ctx: TicketContext, state: TicketState) -> dict[str, Any]:
    """The state's ticket snapshot with its worktree and cwd in this runner's clone (and, in a
    resumed run, its checks as the config and ticket say now: TicketContext.ticket_overrides)."""
    t = state["ticket"]
    if ctx.ticket_overrides:
        t = {**t, **ctx.ticket_overrides}
    ws = t.get("workspace")
    if not ws or ctx.worktrees is None or _ours(ctx, ws.get("path")):
        return t
    run_id = state["run_id"]
    ticket = ctx.store.get_ticket(t["id"])
    if ctx.project_override:
        ticket = ticket.replace(project_path=ctx.project_override)
    record = ctx.run.record()
    if not _ours(ctx, record["worktree"]):
        adopted = ctx.worktrees.adopt(ticket.id, ticket.project_path, Workspace.from_dict(ws))
        if adopted is not None:
            new, source = adopted
            restored = wip.restore(ctx.worktrees, new, ticket.id, run_id)  # what the last turn left, uncommitted
            fields: dict[str, Any] = {"repo": new.repo, "worktree": new.path}
            if record["head_commit"] and not ctx.worktrees.has_at(new.path, record["head_commit"]):
                # A commit the dead runner made and never pushed: its files came back with the work
                # in progress, and the commit node commits them again here.
                fields["head_commit"] = None
            ctx.run.set_fields(**fields)
            ctx.say(f"took over the run begun in {ws['path']} (not here): worktree {new.path} "
                    f"from {source}{f', with {restored}' if restored else ''}")
        else:
            ctx.say(f"took over the run begun in {ws['path']} (not here); its start commit is "
                    "unknown here, so its worktree starts afresh")
    here = run_workspace(ctx, ticket, run_id)  # the adopted worktree, or a fresh one
    assert here is not None
    return {**t, "project_path": str(ticket.project_path), "cwd": here["cwd"], "workspace": here}


def recap(transcript: list[dict[str, Any]], prompt: str) -> str:
    """The next prompt for a new Claude Code session, with what the earlier turns said."""
    lines = ["You are continuing a task that another session began; that session is not available "
             "here. Its earlier turns, for context (their file changes are in this directory only "
             "if they were committed and pushed, so check before relying on them):"]
    for r in transcript:
        lines += [f"\n## Turn {r['turn']} prompt\n{r['prompt']}",
                  f"\n## Turn {r['turn']} answer\n{(r.get('response') or '')[:RECAP_CHARS]}"]
    return "\n".join(lines) + f"\n\n## Now\n{prompt}"
