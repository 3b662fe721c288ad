"""Putting a commit on the base branch: what merge and revert both end with.

The next commit is worked out without touching any working tree (a fast-forward, or a merge
commit from `git merge-tree`), so a conflict leaves the base branch and the user's files as they
were. The base branch then moves in one step: a fast-forward of the user's working tree when the
branch is checked out there (refused, before anything changes, when the user has uncommitted
changes in a file it would write), else a compare-and-swap of the ref. Call both under the
worktrees lock.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.errors import GitError
from orchestrator.workspace import git as g


def combine(repo: Path, old: str, tip: str, message: str) -> tuple[str | None, str, list[str]]:
    """The base branch's next commit when it takes `tip` in: the tip itself (fast-forward), else
    a merge commit of the two (with `message`); None and the conflicting paths when they
    conflict. Returns (commit, how, conflicts)."""
    if g.is_ancestor(repo, old, tip):
        return tip, "fast-forward", []
    merged = g.merge_trees(repo, old, tip)
    if merged.tree is None:
        return None, "", merged.conflicts
    return g.commit_tree(repo, merged.tree, [old, tip], message), "merge commit", []


def advance(repo: Path, base: str, old: str, new: str, *, action: str) -> list[str]:
    """Move the base branch from `old` to its descendant `new`; returns the paths written."""
    paths = [str(r["path"]) for r in g.numstat(repo, old, new)]
    where = g.checked_out_at(repo, base)
    if where is None:
        g.git(repo, "update-ref", "-m", f"middle: {action}", f"refs/heads/{base}", new, old)
        return paths
    clash = sorted(g.dirty_paths(where) & set(paths))
    if clash:
        raise GitError(
            f"cannot {action}: your uncommitted changes in {where} to {', '.join(clash[:10])}"
            f"{' …' if len(clash) > 10 else ''} would be overwritten. Nothing was changed: commit "
            "or stash them, then try again")
    proc = g.git(where, "merge", "--ff-only", "--quiet", new, check=False)
    if proc.returncode != 0:
        raise GitError(f"cannot {action}: git refused to update {where} ({proc.stderr.strip()}); "
                       f"{base} was left as it was")
    return paths
