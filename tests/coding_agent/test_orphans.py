"""No Claude Code process outlives its `middle`: killed with the turn, with a kill -9 of `middle`
(the CLI by the kernel, its tool shells by the turn's guard), or, for anything a dead `middle` left
behind, by the next `middle` that takes the run over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_claude_code_process import worker

from orchestrator.coding_agent.claude_code import ClaudeCodeAgent, ClaudeCodeOptions
from orchestrator.procs.orphans import MARK_VAR, stop_marked
from tickets.procs import is_running, start_ticks

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc and prctl")


def wait_until(check, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def stand_in(mark: str | None, script: str = "import time; time.sleep(300)") -> subprocess.Popen:
    """A long-lived process in a session (and group) of its own, as Claude Code's tool shells run."""
    env = {k: v for k, v in os.environ.items() if k != MARK_VAR}
    if mark is not None:
        env[MARK_VAR] = mark
    return subprocess.Popen([sys.executable, "-c", script], env=env, start_new_session=True)


def test_a_tool_shell_in_a_session_of_its_own_is_killed_with_the_turn(fake_cli, tmp_path):
    pidfile = tmp_path / "pids"
    turn = worker(fake_cli, "detached", FAKE_CLAUDE_PIDFILE=str(pidfile)).run_turn(
        "hi", tmp_path, session_id="sid-detached", resume=False)
    assert turn.is_error is False, turn.error
    child = int(pidfile.read_text().split()[1])
    assert not is_running(child)


def test_claude_code_and_its_tool_shell_die_with_a_killed_middle_and_a_takeover_stops_any_leftover(
        fake_cli, tmp_path):
    pidfile = tmp_path / "pids"
    driver = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        sys.path[:0] = {sys.path!r}
        from test_claude_code_process import worker
        worker({fake_cli!r}, "hang", FAKE_CLAUDE_PIDFILE={str(pidfile)!r}).run_turn(
            "hi", {str(tmp_path)!r}, session_id="sid-hang", resume=False)
        """)], cwd=Path(__file__).parent)
    others: list[subprocess.Popen] = []
    claude = shell = None
    try:
        assert wait_until(pidfile.exists), "the stand-in claude never started"
        claude, shell = map(int, pidfile.read_text().split())
        driver.send_signal(signal.SIGKILL)  # `middle` killed mid-turn
        driver.wait()
        # The kernel kills Claude Code with it (PR_SET_PDEATHSIG)...
        assert wait_until(lambda: not is_running(claude)), "Claude Code outlived the middle that started it"
        # ...and the turn's guard its tool shell, in a session of its own, by its marker.
        assert wait_until(lambda: not is_running(shell)), "the tool shell outlived the middle that started it"
        # What a guard killed with its `middle` (a kill of the whole machine's processes) would
        # leave: the next `middle` on this machine stops it; not what is not ours: another session's,
        # a live middle's (this test's), and an unmarked one.
        leftover = stand_in(f"sid-hang {dead_pid()} 1")
        others = [leftover, stand_in(f"sid-other {dead_pid()} 1"),
                  stand_in(f"sid-hang {os.getpid()} {start_ticks(os.getpid())}"),
                  stand_in(None, "import time; time.sleep(300)  # sid-hang")]
        assert stop_marked(["sid-hang"], owner="dead") == 1
        assert wait_until(lambda: leftover.poll() is not None)
        assert all(p.poll() is None for p in others[1:])
    finally:
        for proc in others:
            proc.kill()
            proc.wait()
        if driver.poll() is None:
            driver.kill()
        for pid in (claude, shell):  # only when an assertion failed: never leave them running
            if pid is not None and is_running(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_marked_process_takes_its_whole_group_with_it(tmp_path):
    # The marked leader and an unmarked member of its group (a tool that cleared its environment).
    leader = stand_in(f"sid-group {dead_pid()} 1", textwrap.dedent(f"""
        import os, subprocess, sys, time
        env = {{k: v for k, v in os.environ.items() if k != {MARK_VAR!r}}}
        member = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env)
        open({str(tmp_path / 'member')!r}, "w").write(str(member.pid))
        time.sleep(300)
        """))
    try:
        assert wait_until(lambda: (tmp_path / "member").exists() and (tmp_path / "member").read_text())
        member = int((tmp_path / "member").read_text())
        assert stop_marked(["sid-group"], owner="dead") == 1
        assert wait_until(lambda: not is_running(member) and leader.poll() is not None)
    finally:
        leader.kill()
        leader.wait()


def test_a_turn_that_is_answered_ends_though_claude_code_stays_for_a_background_task(fake_cli, tmp_path):
    opts = ClaudeCodeOptions(cli_path=fake_cli, turn_timeout_s=60)
    events: list[dict] = []
    turn = ClaudeCodeAgent(opts, env={"FAKE_CLAUDE_MODE": "linger"}).run_turn(
        "hi", tmp_path, session_id="sid-linger", resume=False, on_event=events.append)
    assert turn.is_error is False and turn.text == "answered" and turn.terminal_reason != "timeout", turn.error
    assert not [e for e in events if e["type"] == "timeout"]
    pid = next(e["pid"] for e in events if e["type"] == "start")
    assert not is_running(pid)
