"""A worktree's local files: what `[worktree] copy` brought in and `[worktree] setup` made (an
`.env`, a virtualenv, `node_modules`). They belong to that worktree only: no commit of the
ticket's branch takes them, and the change list leaves them out.

The list lives in the worktree's own git folder (`<git dir>/middle-local`, one path a line): it
belongs to that worktree alone, is never part of a commit, and goes when the worktree goes.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.gitrun import out

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


def excluded(worktree: Path | str) -> list[str]:
    """`git add` pathspecs that leave the local paths out (none when there are none)."""
    return [f":(exclude,top){p.rstrip('/')}" for p in local_paths(worktree)]
