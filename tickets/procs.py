"""Which process a pid is: its start time, so a pid the kernel gave to a new process is told apart.

A claim records its owner's pid and start token; a `middle` killed with -9 leaves both behind, and
the pid may be reused later. Linux only (`/proc`); elsewhere there is no token and a live pid counts.
"""

from __future__ import annotations

import os
from pathlib import Path


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (index 0 is the state), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # The command name is in parentheses and may hold spaces or ")": split after the last one.
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (/proc/PID/stat field 22), or None."""
    fields = stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def process_token(pid: int) -> str | None:
    """"boot id:start ticks" of a running process: the same pid in a later process gets another."""
    ticks, boot = start_ticks(pid), _boot_id()
    return f"{boot}:{ticks}" if ticks is not None and boot else None


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def is_running(pid: int) -> bool:
    """The pid exists and is not a zombie waiting for its reaper (a dead process holds nothing)."""
    if not pid_exists(pid):
        return False
    fields = stat_fields(pid)
    return fields is None or fields[0] != "Z"


def same_process(pid: int, token: str | None) -> bool:
    """Whether `pid` still is the process that `token` (from process_token) was taken of.

    Without a token (none recorded, or no /proc) a running pid is taken to be it.
    """
    if not is_running(pid):
        return False
    if token is None:
        return True
    now = process_token(pid)
    return now is None or now == token
