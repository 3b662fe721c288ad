"""What the commands that read tickets say about them: what a sync changed, and the ticket files
that did not load (or loaded with a warning).

A broken file is said in full, one line, the first time a command meets it; after that `middle
run` and `middle sync` say one short line for all of those already said, and `middle tickets`
(the place to look) always lists each in full. What was said is remembered in the state folder
(`.middle/ticket-problems.json`), a cache: lost or unreadable, everything is said in full again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from orchestrator.cli.output import console, err_console, safe

SAID_FILE = "ticket-problems.json"
_VERSION = 1
_KINDS = (("errors", "skipped", "[yellow]skipped:[/]"), ("warnings", "warning", "[yellow]warning:[/]"))


def say_changes(loaded: Any) -> None:
    """The tickets this sync discarded (closed or gone at the source), put back to pending, or whose
    pull request moved them: each said once, since the next sync finds them changed already."""
    for tid in loaded.discarded:
        console.print(f"discarded {safe(tid)}: {safe(loaded.closed[tid])}")
    for tid in loaded.reopened:
        console.print(f"pending again {safe(tid)}: {safe(loaded.back[tid])}")
    for line in loaded.pull_changes:
        console.print(safe(line))


def shown_path(path: str) -> str:
    """A file as messages show it: relative to the current folder when inside it (URLs as they are)."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith("..") or not Path(path).is_absolute() else relative


def say_problems(loaded: Any, state_dir: Path | None = None) -> None:
    """Each ticket file that did not load (`skipped:`) or loaded with a warning, one line each.

    With `state_dir` (a command that writes), those said by an earlier command are summed up in one
    line instead, pointing at `middle tickets`; without it (`middle tickets`), all are said in full.
    """
    said_file = state_dir / SAID_FILE if state_dir is not None else None
    before = _said(said_file) if said_file is not None else set()
    now: set[str] = set()
    for attr, word, label in _KINDS:
        again = 0
        for problem in getattr(loaded, attr):
            key = f"{word}\0{problem.path}\0{problem.message}"
            now.add(key)
            if key in before:
                again += 1
            else:
                err_console.print(f"{label} {safe(shown_path(problem.path))}: {safe(problem.message)}")
        if again:
            many = again > 1
            what = (("ticket files are still broken" if many else "ticket file is still broken") if word == "skipped"
                    else ("ticket files still have warnings" if many else "ticket file still has a warning"))
            err_console.print(f"{label} {again} {what}: `middle tickets` lists {'them' if many else 'it'}")
    if said_file is not None and now != before:
        from tickets.cache_file import write_json

        write_json(said_file, {"version": _VERSION, "said": sorted(now)})


def _said(path: Path) -> set[str]:
    """The problems an earlier command said (untrusted: anything else reads as none)."""
    from tickets.cache_file import read_json

    data = read_json(path)
    if not isinstance(data, dict) or data.get("version") != _VERSION or not isinstance(data.get("said"), list):
        return set()
    return {item for item in data["said"] if isinstance(item, str)}
