"""No Claude Code process outlives the `middle` that started it (Linux; elsewhere these do nothing).

Three parts:
- `die_with_parent()`: Claude Code is started with PR_SET_PDEATHSIG, so the kernel kills it when
  `middle` dies, even by kill -9.
- `MARK_VAR`: every Claude Code process gets a marker in its environment, "<session id>
  <owner pid> <owner start ticks>", which its tool shells and their children inherit. The session
  id is stored with the turn before launch, so a later `middle` can find a dead run's processes.
  (Claude Code starts each tool shell in a session of its own, so killing Claude Code's process
  group does not reach them; the marker does.)
- `stop_marked()`: kill the process groups of the processes carrying a marker, only after
  proving each is ours: the marker names the session, and its owner is this process or dead.

Besides the coding agent's turns, a run's check and setup commands carry one (`check_mark`) and
so do the middle agent's model calls through a CLI (`model_mark`, provider claude-code or codex).
Each such process gets a session of its own, "<run's key>/<call>", so its end stops only what it
started, while the run's key ("check-<run>", "model-<run>") finds every one a dead run left.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tickets.procs import is_running, start_ticks, stat_fields

if TYPE_CHECKING:
    from tickets.store import TicketStore

log = logging.getLogger(__name__)

MARK_VAR = "MIDDLE_CLAUDE_SESSION"
_PR_SET_PDEATHSIG = 1
_GRACE_S = 3.0  # between SIGTERM and SIGKILL, as for a turn's own process group


def own_mark(session_id: str) -> str:
    """The marker for a Claude Code process this process starts for `session_id`."""
    return f"{session_id} {os.getpid()} {start_ticks(os.getpid())}"


_prctl: Any = None


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A Popen preexec_fn that has the kernel send the child `sig` (SIGKILL: it dies) when its
    parent dies, or None where that cannot be asked for.

    The signal comes when the *thread* that forked exits, not the process: spawn from a thread
    that outlives the child (run_turn does: it waits for the child and kills it before returning).
    """
    global _prctl
    if not sys.platform.startswith("linux"):
        return None
    if _prctl is None:  # resolved here, in the parent: the child only calls it
        try:
            fn = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            return None
        fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        fn.restype = ctypes.c_int
        _prctl = fn
    prctl, parent = _prctl, os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


@dataclass(frozen=True)
class _Proc:
    pid: int
    pgid: int
    ticks: int


def _processes() -> Iterable[tuple[_Proc, bytes]]:
    """Every running process this user may read, with its environment's raw bytes."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for entry in entries:
        if not entry.isdigit():
            continue
        fields = stat_fields(int(entry))
        if fields is None or fields[0] == "Z":
            continue
        try:
            proc = _Proc(int(entry), int(fields[2]), int(fields[19]))
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except (OSError, IndexError, ValueError):  # gone, another user's, or unreadable
            continue
        yield proc, environ


def _mark_of(environ: bytes) -> tuple[str, int, int] | None:
    prefix = MARK_VAR.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            parts = item[len(prefix):].decode("utf-8", "replace").split(" ")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                return parts[0], int(parts[1]), int(parts[2])
    return None


def _owner_gone(pid: int, ticks: int) -> bool:
    return not is_running(pid) or start_ticks(pid) != ticks


def stop_marked(session_ids: Iterable[str], *, owner: str = "dead") -> int:
    """Kill the process groups of processes marked with one of `session_ids`; how many processes
    were marked. `owner="dead"`: only those whose `middle` is gone (a takeover); `owner="self"`:
    only those this process started (the end of its own turn)."""
    wanted = {s for s in session_ids if s}
    if not wanted:
        return 0
    me, my_ticks = os.getpid(), start_ticks(os.getpid())
    groups: dict[int, set[_Proc]] = {}  # pgid -> its members as seen now
    marked = []
    for proc, environ in _processes():
        groups.setdefault(proc.pgid, set()).add(proc)
        mark = _mark_of(environ)
        # "check-<run>/<call>": one call's own session, found by its run's key too
        if mark is None or (mark[0] not in wanted and mark[0].split("/", 1)[0] not in wanted) or proc.pid == me:
            continue
        mine = (mark[1], mark[2]) == (me, my_ticks)
        if (owner == "self" and mine) or (owner == "dead" and not mine and _owner_gone(mark[1], mark[2])):
            marked.append(proc)
    targets = {p.pgid for p in marked} - {os.getpgid(0)}
    if not targets:
        return len(marked)
    log.info("stopping %d leftover process group(s) of Claude Code session(s) %s", len(targets),
             ", ".join(sorted(wanted)))
    _signal_groups(targets, groups, signal.SIGTERM)
    deadline = time.monotonic() + _GRACE_S
    while time.monotonic() < deadline and any(_alive(groups[g]) for g in targets):
        time.sleep(0.05)
    _signal_groups(targets, groups, signal.SIGKILL)
    # Delivered is not done (a busy machine schedules the dying a while later): return once none runs.
    deadline = time.monotonic() + _GRACE_S
    while time.monotonic() < deadline and any(_alive(groups[g]) for g in targets):
        time.sleep(0.02)
    return len(marked)


def _alive(members: set[_Proc]) -> bool:
    return any(is_running(p.pid) and start_ticks(p.pid) == p.ticks for p in members)


def _signal_groups(pgids: set[int], groups: dict[int, set[_Proc]], sig: int) -> None:
    for pgid in pgids:
        # Only while a member seen in the scan is still there: then the group id cannot have been
        # given to anyone else (Linux reuses no pid that still names a process group).
        if not _alive(groups[pgid]):
            continue
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def check_mark(run_id: str) -> str:
    """The marker key of a run's check and setup commands (orchestrator.checks.runner)."""
    return f"check-{run_id}"


def model_mark(run_id: str | None) -> str:
    """The marker key of the middle agent's model calls through a CLI for a run ("model-" alone
    outside a run: `middle doctor`, a memory command)."""
    return f"model-{run_id or ''}"


def one_call(key: str) -> str:
    """A marker session of one process under `key`: its end stops only what it started."""
    return f"{key}/{uuid.uuid4().hex[:12]}"


def run_marks(run_id: str) -> set[str]:
    """The marker keys of a run besides its turns' sessions: its checks' and its model calls'."""
    return {check_mark(run_id), model_mark(run_id)}


_RUN: ContextVar[str | None] = ContextVar("middle_current_run", default=None)


@contextmanager
def running(run_id: str) -> Iterator[None]:
    """The run this thread (and the graph nodes it runs, which copy its context) works for: the
    middle agent's model calls made meanwhile carry `model_mark(run_id)`."""
    token = _RUN.set(run_id)
    try:
        yield
    finally:
        _RUN.reset(token)


def current_run() -> str | None:
    return _RUN.get()


def stop_dead_run(store: TicketStore, run_id: str) -> int:
    """Before a run is continued here: kill what its dead `middle` left running on this machine
    (the processes marked with the sessions of its turns, its checks' or its model calls');
    how many there were."""
    sessions = {t["session_id"] for t in store.list_turns(run_id=run_id) if t["session_id"]} | run_marks(run_id)
    return stop_marked(sessions, owner="dead")
