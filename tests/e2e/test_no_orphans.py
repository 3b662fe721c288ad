"""kill -9 of `middle run --parallel 2` mid-turn: Claude Code dies with it, and so does the
background job it started in a session of its own (the turn's guard, by the orphan marker), with no
next `middle`; `middle tickets` and `middle run` say the run died, and `middle resume` continues it
(the sweep it makes first, for anything a guard could not reach: tests/coding_agent/test_orphans.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from e2e_helpers import decide, done, fresh_project, plan

from orchestrator.fake_api import reply, tool_use, working_directory
from orchestrator.testing import make_repo
from orchestrator.workspace.git import git
from tickets.procs import is_running
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc and prctl")]

MIDDLE = str(Path(sys.executable).with_name("middle"))
# Each ticket's background job, told apart by its length; the pytest process's pid in it keeps
# two test runs on one machine (two checkouts) from counting each other's jobs.
SLEEP = {t: f"sleep {n}{os.getpid():07d}" for t, n in (("t1", 7391), ("t2", 7392))}


def running_with(needle: str) -> list[int]:
    """Running (not zombie) processes whose command line contains needle."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if needle in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    if is_running(int(proc.name)):
                        found.append(int(proc.name))
            except OSError:
                pass
    return found


def wait_until(check, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def ticket_of(body) -> str:
    return Path(working_directory(body) or "?").name


def has_tool_result(body) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def stall_after_starting_the_job(in_flight: threading.Semaphore, release: threading.Event):
    """A worker reply: start the ticket's background job (a tool shell of Claude Code), then, on
    the request that follows, never answer: the turn stays in flight."""
    def step(body):
        if not has_tool_result(body):
            return reply(tool_use("Bash", {"command": SLEEP[ticket_of(body)], "run_in_background": True}))
        in_flight.release()
        release.wait(300)
        return done("never seen: middle is dead")
    return step


def test_kill_9_leaves_no_claude_code_nor_its_background_job_and_resume_continues(
        tmp_path, fake_api, claude_env, claude_cli):
    tickets = {f"{t}.md": f"---\ntitle: Job {t}\nproject: calc\nid: {t}\n---\nStart the job.\n" for t in SLEEP}
    fresh_project(tmp_path, tickets)
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n'
        f'[coding_agent.options]\ncli_path = "{claude_cli}"\nturn_timeout_s = 300\n'
        'allowed_tools = ["Read", "Bash(sleep *)"]\n')
    in_flight, release = threading.Semaphore(0), threading.Event()
    fake_api.script.agent(plan("Start the job."), plan("Start the job."))
    fake_api.script.coding_agent(*[stall_after_starting_the_job(in_flight, release)] * 4)
    env = {**os.environ, **claude_env, "COLUMNS": "250"}
    proc = subprocess.Popen([MIDDLE, "run", "--parallel", "2"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    leftovers: list[str] = list(SLEEP.values())
    try:
        for _ in SLEEP:  # both tickets are mid-turn: Claude Code waits for the model
            assert in_flight.acquire(timeout=180), proc.stdout.read().decode() if proc.poll() is not None else "stuck"
        with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
            sessions = {t: store.get_turn(store.latest_run(t)["id"], 1)["session_id"] for t in SLEEP}
        leftovers += sessions.values()
        assert all(running_with(s) for s in sessions.values())  # Claude Code of each ticket
        assert all(wait_until(lambda s=s: running_with(s)) for s in SLEEP.values())  # and its job

        proc.send_signal(signal.SIGKILL)  # middle only: Claude Code runs in sessions of its own
        proc.wait(30)
        assert wait_until(lambda: not any(running_with(s) for s in sessions.values()), 30), \
            "Claude Code outlived the middle that started it"
        assert wait_until(lambda: not any(running_with(s) for s in SLEEP.values()), 30), \
            "a background job of Claude Code outlived the middle that started it"

        # This machine can see the runs died: `middle tickets` and `middle run` say so.
        listing = subprocess.run([MIDDLE, "tickets"], cwd=tmp_path, env=env, capture_output=True, text=True)
        for t in SLEEP:
            row = next(line for line in listing.stdout.splitlines() if f" {t} " in line)
            assert "interrupted" in row and f"middle resume {t}" in row, listing.stdout
        again = subprocess.run([MIDDLE, "run", "t1"], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert again.returncode != 0
        assert "the process that ran it is gone: continue it with `middle resume t1`" in again.stderr
        assert "`middle resume t1`" in again.stdout + again.stderr

        seen_at_turn: list[list[int]] = []

        def resumed(body):
            seen_at_turn.append(running_with(SLEEP["t1"]))
            return done("Job done.")

        release.set()
        fake_api.script.coding_agent(resumed)
        fake_api.script.agent(decide(True, "Job done."))
        out = subprocess.run([MIDDLE, "resume", "t1"], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        assert seen_at_turn == [[]]
    finally:
        release.set()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for needle in leftovers:  # this test's own processes, whatever happened above
            for pid in running_with(needle):
                os.kill(pid, signal.SIGKILL)


def test_a_worker_killed_mid_turn_leaves_no_claude_code_and_its_successor_takes_the_run_over(
        tmp_path, fake_api, claude_env, claude_cli):
    """The same for `middle worker`: the next worker on this machine takes the run over at once."""
    seed = make_repo(tmp_path / "seed", {"README.md": "jobs\n"})
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(remote))
    home = tmp_path / "worker"
    (home / "tickets").mkdir(parents=True)
    (home / "tickets" / "t1.md").write_text("---\ntitle: Job\nproject: calc\nid: t1\n---\nStart the job.\n")
    (home / "middle.toml").write_text(
        f'state_dir = "state"\n[project]\npath = "."\nrepo_url = "{remote}"\nbase_branch = "main"\n'
        f'[coding_agent.options]\ncli_path = "{claude_cli}"\nturn_timeout_s = 300\n'
        'allowed_tools = ["Read", "Bash(sleep *)"]\n')
    env = {**os.environ, **claude_env}
    subprocess.run([MIDDLE, "sync"], cwd=home, env=env, check=True, capture_output=True)
    in_flight, release = threading.Semaphore(0), threading.Event()
    fake_api.script.agent(plan("Start the job."))
    fake_api.script.coding_agent(*[stall_after_starting_the_job(in_flight, release)] * 2)
    doomed = subprocess.Popen([MIDDLE, "worker"], cwd=home, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, start_new_session=True)
    leftovers = [SLEEP["t1"]]
    try:
        assert in_flight.acquire(timeout=180), doomed.stdout.read().decode() if doomed.poll() is not None else "stuck"
        with TicketStore(home / "state" / "middle.sqlite3") as store:
            session = store.get_turn(store.latest_run("t1")["id"], 1)["session_id"]
        leftovers.append(session)
        assert running_with(session) and wait_until(lambda: running_with(SLEEP["t1"]))
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(30)
        assert wait_until(lambda: not running_with(session), 30), "Claude Code outlived its worker"
        assert wait_until(lambda: not running_with(SLEEP["t1"]), 30), "its background job outlived its worker"
        seen_at_turn: list[list[int]] = []

        def resumed(body):
            seen_at_turn.append(running_with(SLEEP["t1"]))
            return done("Job done.")

        release.set()
        fake_api.script.coding_agent(resumed)
        fake_api.script.agent(decide(True, "Job done."))
        survivor = subprocess.run([MIDDLE, "worker", "--once"], cwd=home, env=env, capture_output=True,
                                  text=True, timeout=300)
        assert survivor.returncode == 0, survivor.stdout + survivor.stderr
        assert seen_at_turn == [[]], survivor.stdout
        with TicketStore(home / "state" / "middle.sqlite3") as store:
            runs = store.list_runs("t1")
            assert [r["status"] for r in runs] == ["complete"]  # taken over, not started again
    finally:
        release.set()
        if doomed.poll() is None:
            os.killpg(doomed.pid, signal.SIGKILL)
        for needle in leftovers:
            for pid in running_with(needle):
                os.kill(pid, signal.SIGKILL)
