"""A check's processes die with the `middle` that runs it, even by kill -9: the `sh` and what it
started (a test runner's workers), not the `sh` alone, and what it started in a session of its own
(`setsid`, a dev server); what a check or a setup command leaves running is ended when it ends;
the `middle` taking a dead run over stops anything left; and a check still reads as it did."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.checks.runner import run_check
from orchestrator.checks.setup import prepare
from orchestrator.procs.orphans import MARK_VAR, check_mark, model_mark, stop_dead_run
from orchestrator.testing import make_repo
from tickets.procs import is_running
from tickets.store import TicketStore


def _run(command: str, cwd: str) -> None:
    run_check(command, cwd, timeout_s=300, run_id="run-k9")


def _started(pid_file: Path, line: str) -> str:
    """`line` in the background, its pid written to `pid_file` once it runs."""
    return f"{line} & echo $! > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}"


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


def test_a_killed_middle_takes_a_checks_child_in_a_session_of_its_own_with_it(tmp_path):
    """A dev server a test started with `setsid` is outside the check's group: the guard ends it
    by the check's marker, with no next `middle` needed."""
    pid_file = tmp_path / "server.pid"
    middle = mp.get_context("spawn").Process(
        target=_run, args=(_started(pid_file, "setsid sleep 300") + "; sleep 300", str(tmp_path)))
    middle.start()
    _wait_for(pid_file.exists, "the check to start its server")
    server = int(pid_file.read_text())
    assert is_running(server)
    os.kill(middle.pid, signal.SIGKILL)
    middle.join(10)
    try:
        _wait_for(lambda: not is_running(server), "the check's server to die with its middle")
    finally:
        if is_running(server):
            os.kill(server, signal.SIGKILL)


def test_what_a_check_leaves_running_ends_with_it(tmp_path):
    in_group, own_session = tmp_path / "in_group.pid", tmp_path / "own_session.pid"
    line = f"{_started(in_group, 'sleep 300')}; {_started(own_session, 'setsid sleep 300')}; echo started"
    pids: list[int] = []
    try:
        for run_id in ("run-1", None):  # a run's check, and one outside a run (the bench's)
            result = run_check(line, tmp_path, timeout_s=60, run_id=run_id)
            assert result.exit_code == 0 and "started" in result.tail, result.tail
            pids = [int(in_group.read_text()), int(own_session.read_text())]
            assert not [pid for pid in pids if is_running(pid)], f"left running after the check ({run_id})"
    finally:
        for pid in pids:
            if is_running(pid):
                os.kill(pid, signal.SIGKILL)


def test_what_a_setup_command_leaves_running_ends_with_it(tmp_path):
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n"})
    server = repo / "server.pid"
    done = prepare(repo, repo, copy=[], setup=[_started(server, "setsid sleep 300")], timeout_s=60, run_id="run-s")
    pid = int(server.read_text())
    try:
        assert done.failed is None
        assert not is_running(pid), "the setup command's server outlived it"
    finally:
        if is_running(pid):
            os.kill(pid, signal.SIGKILL)


def _left_by(mark: str, owner: int) -> subprocess.Popen[bytes]:
    """A process a dead `middle` (pid `owner`) left, carrying `mark`, in a session of its own."""
    env = {**os.environ, MARK_VAR: f"{mark} {owner} 1"}
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env,
                            start_new_session=True)


def test_a_takeover_stops_the_checks_and_model_calls_a_dead_run_left_not_another_runs(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = [_left_by(f"{check_mark('run-d')}/a1", gone.pid), _left_by(f"{model_mark('run-d')}/b2", gone.pid)]
    other = _left_by(f"{check_mark('run-e')}/c3", gone.pid)
    try:
        with TicketStore(tmp_path / "middle.sqlite3") as store:
            assert stop_dead_run(store, "run-d") == 2
        _wait_for(lambda: all(p.poll() is not None for p in left), "the dead run's leftovers to end")
        assert other.poll() is None
    finally:
        for proc in [*left, other]:
            proc.kill()
            proc.wait()
