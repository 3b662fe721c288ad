"""A worktree's local files: what `[worktree] copy` brought in and `[worktree] setup` made (an
`.env`, a virtualenv, `node_modules`). They belong to that worktree only: no commit of the
ticket's branch takes them, nor a work-in-progress save, and the change list leaves them out.

Most of them are gitignored in a real project (`.env`, `.venv/`, `node_modules/`,
`*.egg-info`): `git add -A` leaves those out by itself, and naming one in an `:(exclude)`
pathspec makes git refuse the whole add ("paths are ignored by one of your .gitignore files"),
so only the local paths git does not ignore (an `.env` missing from `.gitignore`, a tracked file
with local content) are excluded by pathspec.

The list lives in the worktree's own git folder (`<git dir>/middle-local`, one path a line): it
belongs to that worktree alone, is never part of a commit, and goes when the worktree goes.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.gitrun import git, out

LOCAL_LIST = "middle-local"


def _list_file(worktree: Path | str) -> Path:
    return Path(out(worktree, "rev-parse", "--path-format=absolute", "--git-path", LOCAL_LIST))


def local_paths(worktree: Path | str) -> list[str]:
    """The worktree's local paths, relative to it (folders end with /)."""
    path = _list_file(worktree)
    if not path.is_file():
        return []
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def add_local(worktree: Path | str, paths: list[str]) -> None:
    """Record more local paths of the worktree."""
    if not paths:
        return
    listed = _list_file(worktree)
    listed.write_text("\n".join(sorted(set(local_paths(worktree)) | set(paths))) + "\n", encoding="utf-8")


def untracked(worktree: Path | str) -> set[str]:
    """The worktree's untracked paths, ignored ones too (a folder git does not track is one entry)."""
    return {p for p in out(worktree, "ls-files", "--others", "--directory", "-z").split("\0") if p}


def ignored(worktree: Path | str, paths: list[str]) -> set[str]:
    """Those of `paths` (relative to the worktree) that git ignores: untracked and matched by a
    `.gitignore`, `info/exclude` or `core.excludesFile` (a tracked file is never ignored)."""
    if not paths:
        return set()
    proc = git(worktree, "check-ignore", "-z", "--stdin", input="\0".join(paths) + "\0", check=False)
    if proc.returncode not in (0, 1):  # 1: none of them is ignored
        return set()  # (then every local path is excluded by pathspec, as before)
    return {p for p in proc.stdout.split("\0") if p}


def excluded(worktree: Path | str) -> list[str]:
    """`git add -A` pathspecs that leave the local paths out (none when there are none): the
    ignored ones need none (git leaves them out, and refuses a pathspec that names one)."""
    listed = local_paths(worktree)
    skip = ignored(worktree, listed)
    return [f":(exclude,top){p.rstrip('/')}" for p in listed if p not in skip]
