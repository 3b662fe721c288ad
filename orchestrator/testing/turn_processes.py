"""The processes of a coding-agent turn, found through /proc (Linux): what the coding-agent contract
checks is gone after a timeout, a stop or a kill -9 of the process that ran the turn."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from orchestrator.procs.orphans import MARK_VAR
from tickets.procs import is_running, start_ticks, stat_fields

__all__ = ["WAIT_S", "alive", "descendants", "group_running", "turn_processes", "wait_until"]

WAIT_S = 60.0  # the longest any condition is waited for (a slow CI machine), never the expected time


def _table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start ticks) of every live (non-zombie) process."""
    table: dict[int, tuple[int, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if entry.isdigit():
            fields = stat_fields(int(entry))
            if fields and fields[0] != "Z":
                try:
                    table[int(entry)] = (int(fields[1]), int(fields[19]))
                except (IndexError, ValueError):
                    continue
    return table


def _marked(pid: int, session_id: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return False
    # "<key>/<call>" (a check's, a model call's): found by its run's key too
    heads = (f"{MARK_VAR}={session_id} ".encode(), f"{MARK_VAR}={session_id}/".encode())
    return any(item.startswith(heads) for item in environ.split(b"\0"))


def descendants(root: int, table: dict[int, tuple[int, int]] | None = None) -> set[int]:
    """The pids of `root`'s live descendants."""
    table = _table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def turn_processes(root: int | None, session_id: str, *, besides: set[int] | None = None) -> set[tuple[int, int]]:
    """(pid, start ticks) of a turn's live processes: `root`'s descendants (but `besides`), and
    any process carrying the orphan marker of `session_id` (a tool shell in a session of its own)."""
    table = _table()
    found = descendants(root, table) - (besides or set()) if root is not None else set()
    found |= {pid for pid in table if pid != os.getpid() and _marked(pid, session_id)}
    return {(pid, table[pid][1]) for pid in found if pid in table}


def group_running(pgid: int) -> set[int]:
    """The pids of process group `pgid`'s members that still run. A zombie is not one: it holds
    nothing and waits for its reaper (init, which in a container may take its time), though
    `os.killpg(pgid, 0)` still finds it."""
    found = set()
    for entry in os.listdir("/proc"):
        fields = stat_fields(int(entry)) if entry.isdigit() else None
        if fields and fields[0] != "Z" and fields[2] == str(pgid):
            found.add(int(entry))
    return found


def alive(procs: set[tuple[int, int]]) -> set[tuple[int, int]]:
    return {(pid, ticks) for pid, ticks in procs if is_running(pid) and start_ticks(pid) == ticks}


def wait_until(check: Callable[[], bool], timeout: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()
