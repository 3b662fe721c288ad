"""Real processes: two `middle run` share one backlog (each ticket once); Ctrl-C marks and resumes."""

from __future__ import annotations

import os
import re
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

MIDDLE = str(Path(sys.executable).with_name("middle"))


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    return {**env, **(extra or {})}


@pytest.mark.parametrize("parallel", ["1", "3"])
def test_two_runners_share_six_pending_tickets_and_run_each_once(tmp_path, claude_cli, parallel):
    tickets = {
        f"t{i}.md": f"---\ntitle: File {i}\nproject: calc\nid: t{i}\n---\n"
                    f"Create `f{i}.txt` with:\n```\nfile {i}\n```\n"
        for i in range(6)
    }
    repo = fresh_project(tmp_path, tickets)
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n'
        f'[coding_agent.options]\ncli_path = "{claude_cli}"\nturn_timeout_s = 120\n')
    procs = [subprocess.Popen([MIDDLE, "run", "--fake", "--parallel", parallel], cwd=tmp_path, env=_env(), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for _ in range(2)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), [(p.returncode, out[-2000:]) for p, out in zip(procs, outputs)]
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        for i in range(6):
            runs = store.list_runs(f"t{i}")
            assert len(runs) == 1 and runs[0]["status"] == "complete", (i, runs, outputs)
            assert store.get_claim(f"t{i}") is None  # released when the run ended
    for i in range(6):
        assert (worktree(tmp_path, f"t{i}") / f"f{i}.txt").read_text() == f"file {i}\n"
        assert not (repo / f"f{i}.txt").exists()
    # (piped, a parallel batch's lines start with "[ticket-id] ")
    completed = [line for out in outputs for line in out.splitlines()
                 if re.sub(r"^\[[^\]]+\] ", "", line).startswith("complete ticket")]
    assert sorted(completed) == sorted(set(completed)) and len(completed) == 6
    # Each runner ends with one summary line; together they account for all six tickets.
    summaries = [out.strip().splitlines()[-1] for out in outputs]
    assert all("ticket(s):" in s and "turn(s)" in s for s in summaries), summaries


def test_ctrl_c_marks_the_run_interrupted_and_resume_finishes_it(tmp_path, fake_api, claude_env, claude_cli):
    fresh_project(tmp_path, {"t1.md": "---\ntitle: Slow\nproject: calc\nid: t1\n---\nOne file.\n"})
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n'
        '[coding_agent.options]\nallowed_tools = ["Read", "Write", "Edit"]\n')
    in_turn, release = threading.Event(), threading.Event()

    def stall(body):
        in_turn.set()
        release.wait(60)
        return "never seen: the turn was interrupted"

    fake_api.script.agent(plan("Create a.txt containing a."))
    fake_api.script.coding_agent(stall)
    proc = subprocess.Popen([MIDDLE, "run", "t1"], cwd=tmp_path, env={**os.environ, **claude_env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert in_turn.wait(120), "Claude Code never started turn 1"
        proc.send_signal(signal.SIGINT)  # what Ctrl-C in the terminal sends to `middle`
        out, err = proc.communicate(timeout=60)
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "interrupted: middle resume t1" in err and "Traceback" not in err + out
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        run = store.latest_run("t1")
        assert run["status"] == "interrupted"
        assert store.get_turn(run["id"], 1)["status"] == "interrupted"
        assert store.get_ticket("t1").status.value == "interrupted"
        assert store.get_claim("t1") is None
    time.sleep(0.5)
    fake_api.script.coding_agent(write_file("a.txt", "a\n"), done("Created a.txt."))
    fake_api.script.agent(decide(True, "Created a.txt."))
    with orchestrator(config(tmp_path, memory=False), fake_api, claude_env) as orch:
        outcome = orch.resume("t1")
    assert outcome.status == "complete" and (worktree(tmp_path, "t1") / "a.txt").read_text() == "a\n"


def test_the_offline_model_fails_a_ticket_it_cannot_do_and_indexes_nothing(tmp_path, claude_cli):
    fresh_project(tmp_path, {"t1.md": "---\ntitle: Refactor billing\nproject: calc\nid: t1\n---\n"
                                      "Split the billing module into two.\n"})
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[memory]\nsave_dir = "mem"\n'
        f'[coding_agent.options]\ncli_path = "{claude_cli}"\n')
    result = subprocess.run([MIDDLE, "run", "--fake"], cwd=tmp_path, env=_env(), text=True,
                            capture_output=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "failed ticket t1" in result.stdout and "can only create files" in result.stdout
    assert "0 complete, 1 failed" in result.stdout.strip().splitlines()[-1]
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        assert store.memory_docs("t1") == []
    listing = subprocess.run([MIDDLE, "memory", "list"], cwd=tmp_path, env=_env(), text=True,
                             capture_output=True, timeout=60)
    assert listing.stdout.strip() == "" and "0 doc(s)" in listing.stderr
