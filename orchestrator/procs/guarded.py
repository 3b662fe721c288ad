"""`Guarded`: the one way `middle` starts a child that could outlive it, and `kill_group`, how such a
child's process group is ended (SIGTERM, a grace period, SIGKILL, and waiting until none runs)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from .group_guard import guard_first, stop_guard, tell_group
from .orphans import MARK_VAR, die_with_parent, own_mark, stop_marked

__all__ = ["KILL_GRACE_S", "Guarded", "kill_group"]

log = logging.getLogger(__name__)

KILL_GRACE_S = 3.0  # between SIGTERM and SIGKILL


@dataclass
class Guarded:
    """A process that does not outlive `middle`, even after kill -9: the one way middle starts a
    long-lived child (a coding agent's turn, the middle agent's model call through a CLI).

    - its own process group, in a session of its own (a stop or a timeout kills the whole group);
    - killed by the kernel when the thread that started it ends (`die_with_parent`): start it
      from the thread that waits for it;
    - the rest of its group killed then too, and every process carrying its marker (`group_guard`:
      a launcher's child doing the work, a shell it started in a session of its own);
    - the orphan marker `mark` in its environment, inherited by all it starts, so what escapes
      the group is ended by `end()` and, after a kill -9, by the guard and, should anything be
      left (the guard killed too), by the next `middle` that takes the run over
      (`orphans.stop_dead_run`).
    """

    proc: subprocess.Popen[Any]
    guard: subprocess.Popen[bytes] | None
    mark: str

    @classmethod
    def start(cls, cmd: list[str], *, mark: str, env: dict[str, str], **popen: Any) -> "Guarded":
        """Start `cmd` (Popen's other arguments in `popen`); OSError when it cannot be started."""
        value = own_mark(mark)
        # The guard first, then the process: killed in between, `middle` leaves nothing unguarded.
        guard = guard_first(f"{MARK_VAR}={value}")
        try:
            proc = subprocess.Popen(cmd, env={**env, MARK_VAR: value}, start_new_session=True,
                                    preexec_fn=die_with_parent(), **popen)
        except BaseException:
            stop_guard(guard)
            raise
        tell_group(guard, proc.pid)
        return cls(proc, guard, mark)

    def end(self) -> None:
        """Kill its group and the processes carrying its marker (a no-op once they are gone), and
        stop its guard."""
        kill_group(self.proc)
        stop_guard(self.guard)
        stop_marked([self.mark], owner="self")


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM the turn's whole process group, give it a grace period, then SIGKILL what is left."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return  # nothing left in the group
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline and _group_alive(proc):
        time.sleep(0.05)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    # SIGKILL is delivered, not done: a busy machine may schedule the dying members a while
    # later. Wait until none still runs, so a turn that returns has nothing of it left running.
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline and _group_alive(proc):
        time.sleep(0.02)
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        log.warning("coding agent process %s did not exit even after SIGKILL", proc.pid)


def _group_alive(proc: subprocess.Popen[Any]) -> bool:
    """Whether any live (non-zombie) process is left in the turn's process group."""
    proc.poll()  # reap the leader as soon as it exits, or it would keep the group "alive"
    try:
        os.killpg(proc.pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    if not os.path.isdir("/proc/self"):
        return True
    # Orphans that already died wait as zombies until init reaps them, which can take a while
    # in containers; they hold nothing open, so only count members that still run.
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == proc.pid and fields[0] != "Z":
                return True
    return False
