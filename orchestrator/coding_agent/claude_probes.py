"""Claude Code's file-watching probe folders: the ones a turn left are removed after it.

Why: at start Claude Code probes whether native file watching works on this host, in a folder
`fswatch-probe-XXXXXX` under its temporary root (`$CLAUDE_CODE_TMPDIR`, else the temporary
directory, then `claude-<uid>`), and removes it once the probe ends (about 1.5 s). A headless
turn is usually over before that, so every turn left one folder holding the probe's `probe` file.

Why not a temporary root per turn (what orchestrator.coding_agent.turn_tmp gives Codex and
OpenCode): Claude Code keeps a session's task output files there too (a long command's output
saved to disk, a background task's log), and the transcript names their paths, which the next
turn, resuming the session with `--resume`, may read. So the root stays, and only the folders
that appeared during the turn and hold nothing but the probe's file are removed, once the turn's
processes are gone. (A probe of another Claude Code running at that moment, say another
ticket's, may lose its folder: that probe then reports "unprobed" or "fired", which only picks
native watching or polling for its settings files.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

PREFIX = "fswatch-probe-"
PROBE_FILE = "probe"  # what the probe writes in its folder, the only entry a left folder holds


def probe_root(env: Mapping[str, str]) -> Path:
    """Claude Code's per-uid temporary root for a process with environment `env` (as it
    computes it: CLAUDE_CODE_TMPDIR, else Node's os.tmpdir(), then `claude-<uid>`)."""
    base = env.get("CLAUDE_CODE_TMPDIR") or env.get("TMPDIR") or env.get("TMP") or env.get("TEMP") or "/tmp"
    return Path(base.rstrip("/") or "/") / f"claude-{os.getuid()}"


def _probes(root: Path) -> set[Path]:
    try:
        return set(root.glob(PREFIX + "*"))
    except OSError:
        return set()


def _remove_left(folder: Path) -> None:
    """Remove a probe folder that holds nothing but the probe's file (anything else: left alone)."""
    try:
        if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
            return
        entries = list(folder.iterdir())
        if any(e.name != PROBE_FILE or e.is_symlink() or not e.is_file() for e in entries):
            return
        for entry in entries:
            entry.unlink()
        folder.rmdir()
    except OSError:  # gone meanwhile (its probe finished), or not ours to remove: nothing to do
        return


@contextmanager
def probes_removed(env: Mapping[str, str]) -> Iterator[None]:
    """Around a turn: on leaving, remove the probe folders that appeared meanwhile."""
    root = probe_root(env)
    before = _probes(root)
    try:
        yield
    finally:
        for folder in sorted(_probes(root) - before):
            _remove_left(folder)


__all__ = ["probe_root", "probes_removed"]
