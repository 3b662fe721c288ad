"""A check's processes die with the `middle` that runs it, even by kill -9: the `sh` and what it
started (a test runner's workers), not the `sh` alone; and a check still reads as it did."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from pathlib import Path

from orchestrator.checks.runner import run_check
from tickets.procs import is_running


def _run(command: str, cwd: str) -> None:
    run_check(command, cwd, timeout_s=300)


def _wait_for(predicate, what: str, deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting: {what}")
        time.sleep(0.05)


def test_a_checks_children_die_when_its_middle_is_killed(tmp_path):
    pid_file = tmp_path / "child.pid"
    # The check starts a child of its own (as pytest-xdist starts workers) and waits for it.
    command = f"sleep 300 & echo $! > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; wait"
    middle = mp.get_context("spawn").Process(target=_run, args=(command, str(tmp_path)))
    middle.start()
    _wait_for(pid_file.exists, "the check to start its child")
    child = int(pid_file.read_text())
    assert is_running(child)
    os.kill(middle.pid, signal.SIGKILL)
    middle.join(10)
    try:
        _wait_for(lambda: not is_running(child), "the check's child to die with its middle")
    finally:
        if is_running(child):
            os.kill(child, signal.SIGKILL)


def test_a_check_still_gives_its_exit_code_and_output(tmp_path: Path):
    result = run_check("echo 'one two'; echo oops >&2; exit 3", tmp_path, timeout_s=60)
    assert result.exit_code == 3 and "one two" in result.tail and "oops" in result.tail
    assert run_check("true", tmp_path, timeout_s=60).exit_code == 0
    slow = run_check("sleep 30", tmp_path, timeout_s=0.5)
    assert slow.timed_out and slow.exit_code is None
