"""`middle gc`: remove worktrees and branches no ticket needs any more (leftovers of crashed runs).

A worktree is kept while its ticket may still need it: running, complete or in conflict (to be
reviewed and merged), failed or interrupted (to be resumed). Everything else under
`<state_dir>/worktrees/` goes, with its `middle/<id>` branch, and git's records of worktrees whose
folders are gone are pruned.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.workspace import git as g
from orchestrator.workspace.worktrees import BRANCH_PREFIX, Worktrees

NEEDED = frozenset({"running", "complete", "conflict", "failed", "interrupted"})


@dataclass
class GcReport:
    worktrees: list[str] = field(default_factory=list)
    branches: list[str] = field(default_factory=list)


def _status(store: Any, ticket_id: str) -> str | None:
    return store.get_ticket(ticket_id).status.value if store.has_ticket(ticket_id) else None


def _repo_of(worktree: Path) -> Path | None:
    proc = g.git(worktree, "rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
    if proc.returncode != 0:
        return None
    common = Path(proc.stdout.strip())
    return common.parent if common.name == ".git" else common


def collect(store: Any, worktrees: Worktrees, repos: list[Path], *, dry_run: bool = False) -> GcReport:
    """Remove what no ticket needs; `repos` are the repositories tickets ran in (for branches)."""
    report = GcReport()
    with worktrees.locked():
        for path in worktrees.leftovers():
            if _status(store, path.name) in NEEDED:
                continue
            report.worktrees.append(str(path))
            if dry_run:
                continue
            repo = _repo_of(path)
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
                if worktrees.path_for(ticket_id).exists() and not dry_run:
                    continue  # checked out somewhere we did not remove: leave it
                report.branches.append(f"{repo}:{branch}")
                if not dry_run:
                    g.git(repo, "branch", "-D", branch, check=False)
    return report
