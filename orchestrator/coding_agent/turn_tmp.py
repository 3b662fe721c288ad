"""A temporary directory for one turn of a CLI (its TMPDIR), removed after the turn.

Why: some CLIs leave files in $TMPDIR on every start (OpenCode a 5.5 MB native library), and
Codex's sandbox is given a private one. A `middle` killed with -9 never reaches the removal, so
the directory carries the pid of the `middle` that made it, and the next turn removes those whose
`middle` is gone."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["turn_tmpdir"]


@contextmanager
def turn_tmpdir(prefix: str, parent: str | None = None) -> Iterator[str]:
    """A new directory `<parent>/<prefix><pid>-XXXX` (parent: the temporary directory), removed
    on leaving; first, those of `middle` processes that no longer run are removed."""
    base = Path(parent or tempfile.gettempdir())
    _sweep(base, prefix)
    tmp = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _sweep(base: Path, prefix: str) -> None:
    try:
        entries = list(base.glob(f"{prefix}*-*"))
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(prefix):].split("-", 1)[0]
        try:
            mine = entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (another user's process: it exists)
        return True
    return True
