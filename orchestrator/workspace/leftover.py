"""What a ticket's earlier run left that a new run would throw away: commits on its branch beyond
the base branch, a work-in-progress save, uncommitted edits or untracked files in its worktree
(its local files, what `[worktree] copy` and `setup` made, are not work).

`middle run ID` asks this before it starts a ticket over (a new run replaces the worktree and the
branch): with work there it refuses and names `middle resume`, `middle feedback` and `--fresh`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.workspace import git as g
from orchestrator.workspace import wip
from orchestrator.workspace.local_files import local_paths
from orchestrator.workspace.worktrees import Worktrees, branch_name, wip_ref

SHOWN = 5  # paths named per kind


@dataclass
class Leftover:
    branch: str
    commits: int = 0  # on the branch, beyond the base branch
    wip: bool = False  # a work-in-progress save holding edits
    edited: list[str] = field(default_factory=list)  # tracked files changed in the worktree
    untracked: list[str] = field(default_factory=list)  # new files in the worktree (not ignored, not local)

    def __bool__(self) -> bool:
        return bool(self.commits or self.wip or self.edited or self.untracked)

    def describe(self) -> str:
        parts = []
        if self.commits:
            parts.append(f"{self.commits} commit(s) on {self.branch}")
        if self.edited:
            parts.append("uncommitted edits to " + _names(self.edited))
        if self.untracked:
            parts.append("untracked " + _names(self.untracked))
        if self.wip:
            parts.append(f"a work-in-progress save ({wip_ref(self.branch.split('/', 1)[-1])})")
        return "; ".join(parts)


def _names(paths: list[str]) -> str:
    return ", ".join(paths[:SHOWN]) + (f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else "")


def leftover_work(worktrees: Worktrees, project: Path, ticket_id: str, base_branch: str | None) -> Leftover:
    """The ticket's work in this clone (`base_branch`: the branch its runs started from)."""
    repo = g.toplevel(project.resolve())
    left = Leftover(branch_name(ticket_id))
    tip = g.branch_commit(repo, left.branch)
    base = base_branch or worktrees.base_branch or g.current_branch(repo)
    if tip is not None:
        stop = [f"^{c}" for c in (g.branch_commit(repo, base) if base else None,) if c]
        left.commits = int(g.out(repo, "rev-list", "--count", tip, *stop) or 0) if stop else 0
    saved = g.ref_commit(repo, wip_ref(ticket_id))
    if saved and wip.changed(repo, saved):  # (and not what the branch holds already)
        left.wip = tip is None or g.out(repo, "rev-parse", f"{saved}^{{tree}}") != g.out(repo, "rev-parse",
                                                                                       f"{tip}^{{tree}}")
    path = worktrees.path_for(ticket_id)
    if path.is_dir() and (path / ".git").exists():
        local = tuple(p.rstrip("/") for p in local_paths(path))
        for item in _status(path):
            code, name = item[:2], item[3:]
            if any(name == p or name.startswith(p + "/") for p in local):
                continue
            (left.untracked if code == "??" else left.edited).append(name)
    return left


def _status(worktree: Path) -> list[str]:
    """`git status --porcelain` entries (untracked files one by one; ignored ones left out)."""
    text = g.git(worktree, "status", "--porcelain=v1", "-z", "--untracked-files=all").stdout
    items, entries, i = text.split("\0"), [], 0
    while i < len(items):
        item = items[i]
        i += 1
        if len(item) < 4:
            continue
        entries.append(item)
        if item[0] in "RC":  # a rename or copy: the next field is the old path
            i += 1
    return entries
