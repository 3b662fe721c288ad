"""A new worktree made able to run the project's checks: `[worktree] copy` brings untracked files
(`.env`, a local config) from the project, `[worktree] setup` runs once (install the project,
`npm ci`), and what the two leave in the worktree is recorded as local
(orchestrator.workspace.local_files), so no commit of the ticket's branch ever takes it. A check
leaves nothing behind: what it made untracked is removed after it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.checks.runner import CheckResult, run_check
from orchestrator.config.settings import CheckCommand
from orchestrator.errors import ConfigError
from orchestrator.gitrun import git
from orchestrator.workspace.local_files import add_local, local_paths, untracked


@dataclass
class Prepared:
    """What making a worktree ready did: the files copied and each setup command's result."""

    copied: list[str] = field(default_factory=list)
    setup: list[CheckResult] = field(default_factory=list)

    @property
    def failed(self) -> CheckResult | None:
        return next((r for r in self.setup if not r.passed), None)


def copy_files(project: Path, worktree: Path, patterns: list[str]) -> list[str]:
    """Copy `[worktree] copy` from the project into the worktree (paths or globs, relative to the
    project); the copied paths, relative. A pattern that matches nothing is a ConfigError."""
    copied: list[str] = []
    for pattern in patterns:
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise ConfigError(f"[worktree] copy: {pattern!r} must be a path inside the project, relative to it")
        matches = sorted(project.glob(pattern))
        if not matches:
            raise ConfigError(f"[worktree] copy: {pattern!r} matches nothing in {project}: fix the path, or "
                              "remove it from the list")
        for source in matches:
            rel = source.relative_to(project)
            target = worktree / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(source, target, follow_symlinks=False)
            copied.append(rel.as_posix())
    return copied


def prepare(project: Path, worktree: Path, *, copy: list[str], setup: list[str], timeout_s: float,
            run_id: str | None = None, say: Callable[[str], None] | None = None,
            on_result: Callable[[CheckResult], None] | None = None) -> Prepared:
    """Copy, then run the setup commands in order (stopping at the first that fails); record what
    both left as local paths. `on_result` gets each setup command's result as it ends."""
    before = untracked(worktree)
    done = Prepared(copied=copy_files(project, worktree, copy) if copy else [])
    if done.copied and say:
        say(f"copied {len(done.copied)} untracked file(s) from the project into the worktree: "
            + ", ".join(done.copied[:5]) + (" …" if len(done.copied) > 5 else ""))
    for command in setup:
        if say:
            say(f"worktree setup: {command}")
        # a setup line is judged by its exit code alone (`pip install pytest` is not a test run)
        result = run_check(CheckCommand(run=command, format="exit-code"), worktree, timeout_s=timeout_s, run_id=run_id)
        done.setup.append(result)
        if on_result:
            on_result(result)
        if say and result.passed:  # (a failure is said by the caller, with what to do)
            last = last_line(result.tail)
            say(f"worktree setup `{command}` passed ({result.duration_s:.1f}s)" + (f": {last}" if last else ""))
        if not result.passed:
            break
    add_local(worktree, sorted((untracked(worktree) - before) | set(done.copied)))
    return done


def last_line(text: str, limit: int = 200) -> str:
    """The last non-blank line of a command's output, cut to `limit` characters."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:limit] if lines else ""


def remove_new_untracked(worktree: Path, before: set[str]) -> list[str]:
    """Delete what a check left untracked in the worktree (caches, build output): the paths that
    were not there before it and are not local; which were removed."""
    keep = {k.rstrip("/") for k in local_paths(worktree)}
    left = sorted(p for p in untracked(worktree) - before if p.rstrip("/") not in keep)
    if left:
        git(worktree, "clean", "-fdxq", "--", *left)
    return left
