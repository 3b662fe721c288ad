"""JSON cache files: read whatever is there, replace atomically, never fail the command.

The memos that spare `middle tickets`, `middle log` and `middle --help` their slowest imports
(tickets.source's parsed files, orchestrator.config.memo, orchestrator.plugins.index) are caches,
not state: one that is missing, unreadable or not JSON reads as None, and one that cannot be
written is skipped (the next command computes again). They hold data only, never code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_json(path: Path) -> Any:
    """The file's JSON value, or None if it is missing, unreadable or not JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_json(path: Path, value: Any) -> None:
    """Replace the file with `value` atomically (a reader sees the old file or the new one), as a
    file only its user can read (mkstemp's 0600: a store URL in a memo may carry a password)."""
    import tempfile  # here: most commands only read their memos

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(value, out)
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        _sweep(path)
    except OSError:
        pass  # a read-only cache folder: the next command computes again


LEFTOVER_S = 600  # a writer's temporary file lives for milliseconds; one this old lost its writer


def _sweep(path: Path) -> None:
    """Remove temporary files that writers of this memo killed mid-write (kill -9) left."""
    import time

    now = time.time()
    for tmp in path.parent.glob(f".{path.stem}-*.tmp"):
        try:
            if now - tmp.stat().st_mtime > LEFTOVER_S:
                tmp.unlink()
        except OSError:
            pass  # another writer swept it first
