"""A turn's whole process group ends with a killed `middle`, not only the CLI it started (Linux).

`die_with_parent` has the kernel kill the CLI process when `middle` dies, even by kill -9; what the
CLI started lives on. A CLI that is a launcher (Codex's `codex` is a Node script running the native
`codex` binary as its child) would leave the process doing the work running, still asking the model,
until a later `middle` took the run over, and for good when none does. So each turn gets a guard:
a tiny process, told by the kernel (PDEATHSIG, SIGTERM) when `middle`'s waiting thread is gone,
which then SIGKILLs the turn's group, and then the groups of the processes carrying the turn's
orphan marker (a tool shell Claude Code starts in a session of its own, a server a check command
left): nothing of a killed `middle` waits for a next `middle` to sweep it. It cannot be a member
of that group (the CLI's group is in a session of its own, which no other process can join), so it
runs in a session of its own too (a Ctrl-C at the terminal does not reach it), and the turn's end
stops it first (`stop_guard`, with SIGKILL: it does nothing).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

__all__ = ["guard_first", "stop_guard", "tell_group"]

log = logging.getLogger(__name__)

# Runs in its own interpreter (-I -S: no site, no environment: starts in milliseconds). The
# handler is installed before the kernel is asked for the signal, and the parent checked after,
# so a `middle` that died in between is seen too. SIGTERM always ends the group: the kernel sends
# it when the thread that started the guard ends, and while `middle` dies its children are first
# handed to another of its (dying) threads, so `getppid()` cannot tell a dying `middle` from a
# live one. The turn's own end stops the guard with SIGKILL, which runs nothing.
# With a marker ("VAR=session owner ticks", this very process's: owned by the dying `middle`),
# it then also kills the groups of the processes carrying it (a tool shell, a server a check left,
# each in a session of its own), so nothing of a killed `middle` waits for the next one to sweep.
_GUARD = r"""
import ctypes, os, signal, sys
mark, group, parent = sys.argv[1].encode(), int(sys.argv[2]), int(sys.argv[3])
def marked():
    found = set()
    for entry in os.listdir("/proc") if mark else ():
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as f:
                if mark in f.read().split(b"\0"):
                    found.add(os.getpgid(int(entry)))
        except OSError:
            pass
    return found - {os.getpgid(0)}
def end(*_):
    groups = {group} if group else marked()
    for _ in range(3):  # again: a marked process may have started another while we killed
        for pgid in groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
        groups = marked()
        if not groups:
            break
    os._exit(0)
signal.signal(signal.SIGTERM, end)
ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
if os.getppid() != parent:
    end()
if group == 0:  # started before the process it guards: its group comes on stdin (none: EOF)
    line = sys.stdin.readline().strip()
    group = int(line) if line.isdigit() else 0
while True:
    signal.pause()
"""


def guard_first(mark: str) -> subprocess.Popen[bytes] | None:
    """Start a guard before the process it guards exists (`tell_group` gives it the group once
    started): a `middle` killed between starting a child and starting the child's guard left
    that child's own-session processes running (seen on a loaded machine). Until told, the guard
    ends the processes carrying `mark`."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return subprocess.Popen([sys.executable, "-I", "-S", "-c", _GUARD, mark, "0", str(os.getpid())],
                                start_new_session=True, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    except OSError as exc:  # no interpreter to start (a broken install): the child still dies with middle
        log.warning("no guard for the process about to start: %s", exc)
        return None


def tell_group(guard: subprocess.Popen[bytes] | None, pgid: int) -> None:
    """Give a guard started by `guard_first` the group it guards (a guard already gone: nothing)."""
    if guard is None or guard.stdin is None:
        return
    try:
        guard.stdin.write(f"{pgid}\n".encode())
        guard.stdin.close()
    except OSError:  # the guard ended (it ends the marked processes itself)
        pass


def stop_guard(guard: subprocess.Popen[bytes] | None) -> None:
    """End a turn's guard before the turn's thread ends (SIGKILL: it signals nothing) and reap it."""
    if guard is None:
        return
    guard.kill()
    guard.wait()
