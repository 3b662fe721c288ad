"""A turn's whole process group ends with a killed `middle`, not only the CLI it started (Linux).

`die_with_parent` has the kernel kill the CLI process when `middle` dies, even by kill -9; what the
CLI started lives on. A CLI that is a launcher (Codex's `codex` is a Node script running the native
`codex` binary as its child) would leave the process doing the work running, still asking the model,
until a later `middle` took the run over, and for good when none does. So each turn gets a guard:
a tiny process, told by the kernel (PDEATHSIG, SIGTERM) when `middle`'s waiting thread is gone,
which then SIGKILLs the turn's group. It cannot be a member of that group (the CLI's group is in a
session of its own, which no other process can join), so it runs in a session of its own too (a
Ctrl-C at the terminal does not reach it), and the turn's end stops it first (`stop_guard`, with
SIGKILL: it does nothing).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

__all__ = ["guard_group", "stop_guard"]

log = logging.getLogger(__name__)

# Runs in its own interpreter (-I -S: no site, no environment: starts in milliseconds). The
# handler is installed before the kernel is asked for the signal, and the parent checked after,
# so a `middle` that died in between is seen too. SIGTERM always ends the group: the kernel sends
# it when the thread that started the guard ends, and while `middle` dies its children are first
# handed to another of its (dying) threads, so `getppid()` cannot tell a dying `middle` from a
# live one. The turn's own end stops the guard with SIGKILL, which runs nothing.
_GUARD = r"""
import ctypes, os, signal, sys
group, parent = int(sys.argv[1]), int(sys.argv[2])
def end(*_):
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
    os._exit(0)
signal.signal(signal.SIGTERM, end)
ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
if os.getppid() != parent:
    end()
while True:
    signal.pause()
"""


def guard_group(pgid: int) -> subprocess.Popen[bytes] | None:
    """Start the guard of process group `pgid` (call it from the thread that waits for the turn:
    the kernel's signal comes when that thread ends); None where it cannot run (not Linux, or the
    group already gone)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return subprocess.Popen([sys.executable, "-I", "-S", "-c", _GUARD, str(pgid), str(os.getpid())],
                                start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    except OSError as exc:  # no interpreter to start (a broken install): the CLI still dies with middle
        log.warning("no guard for the turn's process group %s: %s", pgid, exc)
        return None


def stop_guard(guard: subprocess.Popen[bytes] | None) -> None:
    """End a turn's guard before the turn's thread ends (SIGKILL: it signals nothing) and reap it."""
    if guard is None:
        return
    guard.kill()
    guard.wait()
