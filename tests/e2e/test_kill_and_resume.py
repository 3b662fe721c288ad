"""A `middle run` process killed mid-turn (SIGKILL, Claude Code too) is finished by resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from e2e_helpers import config, decide, done, fresh_project, orchestrator, plan, worktree, write_file

from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]


def kill_processes_mentioning(needle: str) -> int:
    """SIGKILL every process whose command line contains needle (an orphaned Claude Code, should
    one have been left); how many there were."""
    killed = 0
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if needle in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    os.kill(int(proc.name), signal.SIGKILL)
                    killed += 1
            except (OSError, ProcessLookupError):
                pass
    return killed


def test_sigkill_mid_turn_then_resume(tmp_path, fake_api, claude_env, claude_cli):
    repo = fresh_project(tmp_path, {"t1.md": "---\ntitle: Two steps\nproject: calc\nid: t1\n---\nTwo files.\n"})
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[memory]\nsave_dir = "mem"\n'
        '[coding_agent.options]\nallowed_tools = ["Read", "Write", "Edit"]\n')
    in_turn_two, release = threading.Event(), threading.Event()

    def stall(body):
        in_turn_two.set()
        release.wait(60)
        return "never seen: the process is dead"

    fake_api.script.agent(
        plan("Create a.txt containing a."), decide(False, next_prompt="Now create b.txt containing b.")
    )
    fake_api.script.coding_agent(write_file("a.txt", "a\n"), done("Created a.txt."), stall)
    middle = Path(sys.executable).with_name("middle")
    proc = subprocess.Popen(
        [str(middle), "run", "t1"],
        cwd=tmp_path,
        env={**os.environ, **claude_env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert in_turn_two.wait(120), proc.stdout.read().decode() if proc.poll() is not None else "no turn 2"
        with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
            run = store.latest_run("t1")
            turn2 = store.get_turn(run["id"], 2)
        # The session id was stored before Claude Code was launched for turn 2.
        assert turn2["status"] == "running" and turn2["session_id"]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        # Claude Code, in a session of its own, dies with it (PR_SET_PDEATHSIG; test_no_orphans.py).
        deadline = time.monotonic() + 30
        while kill_processes_mentioning(turn2["session_id"]) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        release.set()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(0.5)
    worker_requests_before = len(fake_api.requests_for("coding_agent"))
    fake_api.script.coding_agent(write_file("b.txt", "b\n"), done("Created b.txt."))
    fake_api.script.agent(decide(True, "Created a.txt and b.txt."))
    cfg = config(tmp_path, memory=True)
    with orchestrator(cfg, fake_api, claude_env) as orch:
        outcome = orch.resume("t1")
        assert outcome.status == "complete", outcome
        turns = orch.store.list_turns(ticket_id="t1")
    assert [(t["turn_no"], t["status"], t["response"]) for t in turns] == [
        (1, "done", "Created a.txt."),
        (2, "done", "Created b.txt."),
    ]
    assert turns[1]["session_id"] == turn2["session_id"]
    wt = worktree(tmp_path, "t1")
    assert (wt / "a.txt").read_text() == "a\n" and (wt / "b.txt").read_text() == "b\n"
    assert not (repo / "a.txt").exists()
    # Turn 1 was not run again: after the kill only turn 2's two requests reached the fake.
    assert len(fake_api.requests_for("coding_agent")) - worker_requests_before == 2
