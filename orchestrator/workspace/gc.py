"""`middle gc`: remove worktrees and branches no ticket needs any more (leftovers of crashed runs).

A worktree is kept while its ticket may still need it: running, complete or in conflict (to be
reviewed and merged), failed or interrupted (to be resumed). Everything else under
`<state_dir>/worktrees/` goes, with its `middle/<id>` branch, and git's records of worktrees whose
folders are gone are pruned.

It never deletes work it cannot account for unless `force`: a worktree holding uncommitted or
untracked files, commits that are on no other branch and that no run recorded, or a `middle/`
branch that middle did not create (no run recorded it, and no worktree of ours had it checked
out). Those are kept and reported, with how to remove them.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.workspace import git as g
from orchestrator.workspace.worktrees import BRANCH_PREFIX, Worktrees

if TYPE_CHECKING:
    from tickets.model import RunRow
    from tickets.store import TicketStore

NEEDED = frozenset({"running", "complete", "conflict", "failed", "interrupted"})
_NAMED = 5  # dirty paths named in a "kept" line


@dataclass
class GcReport:
    worktrees: list[str] = field(default_factory=list)
    branches: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # one line each: what, why, how to remove it


def _status(store: TicketStore, ticket_id: str) -> str | None:
    return store.get_ticket(ticket_id).status.value if store.has_ticket(ticket_id) else None


def _runs(store: TicketStore, ticket_id: str) -> list[RunRow]:
    return store.list_runs(ticket_id) if store.has_ticket(ticket_id) else []


def _repo_of(worktree: Path) -> Path | None:
    proc = g.git(worktree, "rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
    if proc.returncode != 0:
        return None
    common = Path(proc.stdout.strip())
    return common.parent if common.name == ".git" else common


def _saved(repo: Path, commit: str, own: str | None, runs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether deleting `own` (a branch, or a worktree's HEAD) loses no commit: `commit` is on
    another branch, or a run recorded it (its start, its completion or its merge)."""
    recorded = {r.get(k) for r in runs for k in ("base_commit", "head_commit", "merge_commit", "premerge_commit")}
    if commit in recorded:
        return True
    refs = g.out(repo, "for-each-ref", "--contains", commit, "--format=%(refname)", "refs/heads", "refs/remotes")
    return any(ref != f"refs/heads/{own}" for ref in refs.splitlines() if ref)


def _why_keep_worktree(path: Path, repo: Path | None, runs: Sequence[Mapping[str, Any]]) -> str | None:
    """Why removing this worktree would lose work (None: nothing would be lost)."""
    if repo is None:
        if any(path.iterdir()):
            return "it is not a git worktree and holds files middle cannot account for"
        return None
    dirty = sorted(g.dirty_paths(path))
    if dirty:
        named = ", ".join(dirty[:_NAMED]) + (" …" if len(dirty) > _NAMED else "")
        return f"it holds uncommitted or untracked files ({named})"
    head = g.git(path, "rev-parse", "--verify", "--quiet", "HEAD", check=False).stdout.strip()
    if head and not _saved(repo, head, g.current_branch(path), runs):
        return f"its commit {head[:10]} is on no other branch and no run recorded it"
    return None


def collect(store: TicketStore, worktrees: Worktrees, repos: list[Path], *, dry_run: bool = False,
            force: bool = False) -> GcReport:
    """Remove what no ticket needs; `repos` are the repositories tickets ran in (for branches).
    Work it cannot account for is kept (and reported) unless `force`."""
    report = GcReport()
    ours: set[tuple[Path, str]] = set()  # (repo, branch) checked out in a worktree of ours we remove
    repos = list(repos)
    with worktrees.locked():
        for path in worktrees.leftovers():
            status = _status(store, path.name)
            if status in NEEDED:
                continue
            repo = _repo_of(path)
            why = _why_keep_worktree(path, repo, _runs(store, path.name))
            if why and not force:
                report.kept.append(f"worktree {path}: {why}; save what you need, then remove it with "
                                   "`middle gc --force`")
                continue
            report.worktrees.append(str(path))
            if repo is not None:
                branch = g.current_branch(path)
                if branch:
                    ours.add((repo, branch))
                if repo not in repos:
                    repos.append(repo)
            if dry_run:
                continue
            if repo is not None:
                g.git(repo, "worktree", "remove", "--force", "--force", str(path), check=False)
            if path.exists():
                shutil.rmtree(path, ignore_errors=True)
        for repo in repos:
            if not repo.is_dir() or g.git(repo, "rev-parse", "--git-dir", check=False).returncode:
                continue
            if not dry_run:
                g.git(repo, "worktree", "prune", check=False)
            for branch in g.branches(repo, BRANCH_PREFIX.rstrip("/")):
                ticket_id = branch[len(BRANCH_PREFIX):]
                if not branch.startswith(BRANCH_PREFIX) or _status(store, ticket_id) in NEEDED:
                    continue
                path = worktrees.path_for(ticket_id)
                if path.exists() and str(path) not in report.worktrees:
                    continue  # checked out in a worktree that stays: leave it
                why = _why_keep_branch(repo, branch, _runs(store, ticket_id), ours)
                if why and not force:
                    report.kept.append(f"branch {repo}:{branch}: {why}; delete it with "
                                       f"`git -C {repo} branch -D {branch}` or `middle gc --force`")
                    continue
                report.branches.append(f"{repo}:{branch}")
                if not dry_run:
                    g.git(repo, "branch", "-D", branch, check=False)
    return report


def _why_keep_branch(repo: Path, branch: str, runs: Sequence[Mapping[str, Any]],
                     ours: set[tuple[Path, str]]) -> str | None:
    """Why deleting this `middle/` branch would lose work or a branch of the user's (None: neither)."""
    created = (repo, branch) in ours or any(r.get("branch") == branch and r.get("repo") and
                                            Path(r["repo"]) == repo for r in runs)
    if not created:
        return "middle did not create it (no run of its ticket recorded it)"
    tip = g.branch_commit(repo, branch)
    if tip and not _saved(repo, tip, branch, runs):
        return f"its commit {tip[:10]} is on no other branch and no run recorded it"
    return None
