"""Putting a commit on the base branch: what merge and revert both end with.

The next commit is worked out without touching any working tree (a fast-forward, or a merge
commit from `git merge-tree`), so a conflict leaves the base branch and the user's files as they
were. The base branch then moves in one step: a fast-forward of the user's working tree when the
branch is checked out there (refused, before anything changes, when the user has uncommitted
changes in a file it would write), else a compare-and-swap of the ref. Call both under the
worktrees lock.

In a team (`[project] repo_url`) the base branch is pushed to the shared repository before it
moves here, so a worker starts the next ticket from it: a push the shared repository refuses
(another machine moved its base branch) changes nothing, here or there, and the merge or revert
is not recorded.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.errors import GitError
from orchestrator.killpoints import point
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


def advance(repo: Path, base: str, old: str, new: str, *, action: str, publish: str | None = None) -> list[str]:
    """Move the base branch from `old` to its descendant `new`; returns the paths written.
    `publish`: the shared repository ([project] repo_url) `new` is pushed to first."""
    paths = [str(r["path"]) for r in g.numstat(repo, old, new)]
    where = g.checked_out_at(repo, base)
    if where is not None:
        clash = sorted(g.dirty_paths(where) & set(paths))
        if clash:
            raise GitError(
                f"cannot {action}: your uncommitted changes in {where} to {', '.join(clash[:10])}"
                f"{' …' if len(clash) > 10 else ''} would be overwritten. Nothing was changed: commit "
                "or stash them, then try again")
    if publish:
        push_base(repo, publish, base, new, action=action)
    if where is None:
        g.git(repo, "update-ref", "-m", f"middle: {action}", f"refs/heads/{base}", new, old)
        point("base.advanced")
        return paths
    proc = g.git(where, "merge", "--ff-only", "--quiet", new, check=False)
    if proc.returncode != 0:
        kept = (f"; the shared repository has it already: `git pull` in {where}, then run the same "
                "command again to record it") if publish else ""
        raise GitError(f"cannot {action}: git refused to update {where} ({proc.stderr.strip()}); "
                       f"{base} was left as it was{kept}")
    point("base.advanced")
    return paths


def push_base(repo: Path, url: str, base: str, commit: str, *, action: str, holding: str | None = None) -> None:
    """Put `commit` on the shared repository's base branch, only as a fast-forward (git's own
    check, atomic there). Refused when that branch has commits `commit` lacks (another machine
    merged meanwhile): one GitError saying to fetch them first. `holding`: a commit already on the
    shared base branch is enough (a ticket marked merged whose commits are there already)."""
    proc = g.git(repo, "push", "--quiet", "--porcelain", url, f"{commit}:refs/heads/{base}", check=False)
    if proc.returncode == 0:
        return
    if holding is not None and _remote_holds(repo, url, base, holding):
        return
    if "[rejected]" in proc.stdout or "non-fast-forward" in proc.stdout + proc.stderr:
        raise GitError(
            f"cannot {action}: {base} on the shared repository ([project] repo_url) has moved on (another "
            f"machine merged into it): fetch it (`git pull` on {base}), then try again. Nothing was changed")
    lines = [line for line in (proc.stderr or proc.stdout).strip().splitlines() if line.strip()]
    said = [line for line in lines if line.startswith(("fatal:", "error:"))] or lines
    raise GitError(f"cannot {action}: pushing {base} to [project] repo_url failed "
                   f"({said[-1] if said else proc.returncode}). Nothing was changed")


def _remote_holds(repo: Path, url: str, base: str, commit: str) -> bool:
    """Whether the shared repository's base branch holds `commit` (fetched to FETCH_HEAD)."""
    if g.git(repo, "fetch", "--quiet", url, f"refs/heads/{base}", check=False).returncode != 0:
        return False
    tip = g.ref_commit(repo, "FETCH_HEAD")
    return tip is not None and g.is_ancestor(repo, commit, tip)
