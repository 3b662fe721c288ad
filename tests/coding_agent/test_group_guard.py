"""The turn's group guard (procs/group_guard.py): what a CLI started in its process group
dies with a killed `middle` at once, not only the CLI (a launcher's child: Codex's native binary)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.testing.turn_processes import wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc and prctl")

# The "CLI" is a shell (killed by the kernel with its parent) whose child, a sleep in the same
# process group, is the launcher's worker; its length names this test's process.
WORKER = f"sleep 4{os.getpid():07d}"


def running(needle: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if needle in cmd and state != "Z":
                found.append(int(entry))
    return found


def driver(cmd: str) -> subprocess.Popen[bytes]:
    """`middle`, as far as a turn goes: TurnProcesses.run of `cmd` in a thread of its own."""
    script = textwrap.dedent(f"""
        import os, threading
        from pathlib import Path
        from orchestrator.coding_agent.process import TurnProcesses
        def turn():
            TurnProcesses("test").run(["sh", "-c", {cmd!r}], cwd=Path("."), env=dict(os.environ), stdin=None,
                                      timeout_s=300, mark="s-guard", on_line=lambda line: print(line, flush=True),
                                      emit=lambda event: None)
        thread = threading.Thread(target=turn)
        thread.start()
        thread.join()
        print("turn over", flush=True)
        """)
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, start_new_session=True)


def kill_once_started(proc: subprocess.Popen[bytes], needle: str, what: str) -> None:
    """kill -9 the `middle` once it says "started" and `needle` runs; `needle` must then end."""
    try:
        assert proc.stdout is not None and b"started" in proc.stdout.readline()
        assert wait_until(lambda: bool(running(needle)))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert wait_until(lambda: not running(needle)), what
    finally:
        for pid in running(needle):
            os.kill(pid, signal.SIGKILL)


def test_a_killed_middle_takes_the_clis_children_with_it():
    proc = driver(f"{WORKER} & echo started; wait")
    # No takeover here (no stop_marked): the guard alone ends the group.
    kill_once_started(proc, WORKER, "the CLI's child outlived middle")


def test_a_turn_that_ends_leaves_no_guard_running():
    proc = driver("echo done")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.split(b"\n")[-2] == b"turn over", out
    # The guard's command line ends with the pid of the `middle` that started it.
    guards = [pid for pid in running("signal.pause()")
              if Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").endswith(f"\0{proc.pid}".encode())]
    assert guards == []


def test_a_middle_killed_after_starting_a_child_before_naming_its_group_takes_the_child_with_it():
    """The window between starting a child and telling its guard the group (Guarded.start): the
    guard, started first, ends the processes carrying the child's marker (here a server in a
    session of its own, as a check command's `setsid` leaves one)."""
    server = f"sleep 5{os.getpid():07d}"
    script = textwrap.dedent(f"""
        import os, subprocess, sys
        from orchestrator.procs.group_guard import guard_first
        from orchestrator.procs.orphans import MARK_VAR
        guard = guard_first(MARK_VAR + "=s-window")
        subprocess.Popen(["setsid", "sh", "-c", {server!r}], env={{**os.environ, MARK_VAR: "s-window"}})
        print("started", flush=True)
        sys.stdin.readline()  # killed here: the guard never learns the group
        """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            start_new_session=True)
    kill_once_started(proc, server, "the marked child outlived middle")
