"""The review loop with the real `middle` CLI and the real Claude Code CLI on the fake model:
`middle feedback` continues a complete ticket on its branch and Claude Code session, on a
conflicted ticket, after a kill -9 (then `middle resume`), and while the ticket runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from e2e_helpers import decide, done, fresh_project, plan, worktree, write_file

from orchestrator.agent.prompts import REVIEW
from orchestrator.workspace.git import out
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

MIDDLE = str(Path(sys.executable).with_name("middle"))
FEEDBACK = "also handle empty input"


def setup(tmp_path: Path, tickets: dict[str, str], extra: str = "") -> Path:
    repo = fresh_project(tmp_path, tickets)
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[memory]\nsave_dir = "mem"\nbackend = "bm25"\n'
        '[coding_agent.options]\nallowed_tools = ["Read", "Write", "Edit"]\nturn_timeout_s = 120\n' + extra)
    return repo


def middle(tmp_path: Path, *args: str, env: dict[str, str], ok: bool = True) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    result = subprocess.run([MIDDLE, *args], cwd=tmp_path, env={**base, **env}, text=True,
                            capture_output=True, timeout=300)
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    if ok:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def store(tmp_path: Path) -> TicketStore:
    return TicketStore(tmp_path / "state" / "middle.sqlite3")


def text_of(request) -> str:
    return json.dumps(request.body, ensure_ascii=False)


def one_ticket(tmp_path: Path) -> Path:
    return setup(tmp_path, {"t1.md": "---\ntitle: Parse input\nproject: calc\nid: t1\n---\nWrite parse.py.\n"})


def first_round(tmp_path, fake_api, claude_env) -> None:
    fake_api.script.agent(plan("Create parse.py that parses input."), decide(True, "Added parse.py."))
    fake_api.script.coding_agent(
        write_file("parse.py", "def parse(s):\n    return s.split()\n"), done("Created parse.py.")
    )
    middle(tmp_path, "run", "t1", env=claude_env)


def test_feedback_continues_the_ticket_on_its_branch_and_claude_code_session(
    tmp_path, fake_api, claude_env, claude_cli
):
    repo = one_ticket(tmp_path)
    first_round(tmp_path, fake_api, claude_env)
    round_one_worker = len(fake_api.requests_for("coding_agent"))
    fake_api.script.agent(
        plan("Make parse() return [] for empty input, in empty.py too."), decide(True, "parse() handles empty input.")
    )
    fake_api.script.coding_agent(write_file("empty.py", "EMPTY = []\n"), done("Created empty.py."))
    result = middle(tmp_path, "feedback", "t1", FEEDBACK, env=claude_env)
    assert "complete ticket t1" in result.stdout

    agent = fake_api.requests_for("agent")
    revise = next(r for r in agent if REVIEW in text_of(r))
    assert FEEDBACK in text_of(revise) and "Create parse.py that parses input." in text_of(revise)
    # Claude Code resumed its session: round 2's first request carries round 1's conversation
    worker = fake_api.requests_for("coding_agent")[round_one_worker:]
    assert "Create parse.py that parses input." in text_of(worker[0])
    assert "Make parse() return [] for empty input" in text_of(worker[0])
    with store(tmp_path) as s:
        runs = s.list_runs("t1")
        turns = [s.list_turns(run_id=r["id"]) for r in runs]
        assert [s.round_of(r["id"]) for r in runs] == [1, 2]
        assert turns[1][0]["resume"] and turns[1][0]["session_id"] == turns[0][-1]["session_id"]
        docs = s.memory_docs("t1")
        assert len(docs) == 1 and f"The human's review: {FEEDBACK}." in docs[0]
        assert s.get_ticket("t1").status.value == "complete"
    # new commits on the same branch; the diff is the whole change; the log shows each round
    assert len(out(repo, "log", "--format=%s", "main..middle/t1").splitlines()) == 2
    diff = middle(tmp_path, "diff", "t1", env=claude_env).stdout
    assert "+++ b/parse.py" in diff and "+++ b/empty.py" in diff
    log = middle(tmp_path, "log", "t1", env=claude_env).stdout
    assert f"round 2 — the human's feedback: {FEEDBACK}" in log
    assert (worktree(tmp_path, "t1") / "empty.py").exists()


def test_feedback_on_a_conflicted_ticket_with_the_offline_model_then_it_merges(tmp_path, claude_cli):
    def create(tid: str, body: str) -> tuple[str, str]:
        return (
            f"{tid}.md",
            f"---\ntitle: Create same.py\nproject: calc\nid: {tid}\n---\n"
            f"Create `calc/same.py` with:\n```python\n{body}```\n",
        )

    repo = setup(tmp_path, dict([create("t1", "X = 'first'\n"), create("t2", "X = 'second'\n")]))
    offline: dict[str, str] = {}
    middle(tmp_path, "run", "--fake", env=offline)
    middle(tmp_path, "merge", "t1", env=offline)
    assert middle(tmp_path, "merge", "t2", env=offline, ok=False).returncode == 1
    listing = middle(tmp_path, "tickets", env=offline).stdout
    assert "conflict" in listing
    # keep main's same.py (t1's), put t2's value in a file of its own
    ask = (
        "Create `calc/same.py` with:\n```python\nX = 'first'\n```\n"
        "Create `calc/other.py` with:\n```python\nY = 'second'\n```\n"
    )
    result = middle(tmp_path, "feedback", "t2", ask, "--fake", env=offline)
    assert "complete ticket t2" in result.stdout, result.stdout + result.stderr
    assert out(repo, "show", "middle/t2:calc/same.py") == "X = 'first'"
    middle(tmp_path, "merge", "t2", env=offline)  # the round made the branch merge cleanly
    assert (repo / "calc" / "same.py").read_text() == "X = 'first'\n"
    assert (repo / "calc" / "other.py").read_text() == "Y = 'second'\n"
    log = middle(tmp_path, "log", "t2", env=offline).stdout
    assert "round 2 — the human's feedback" in log


def test_a_round_killed_mid_turn_is_finished_by_resume_and_nothing_runs_twice(
    tmp_path, fake_api, claude_env, claude_cli
):
    one_ticket(tmp_path)
    first_round(tmp_path, fake_api, claude_env)
    entered, release = threading.Event(), threading.Event()

    def stall(body):
        entered.set()
        release.wait(120)
        return "never seen: the process is dead"

    fake_api.script.agent(plan("Handle empty input in empty.py."))
    fake_api.script.coding_agent(stall)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    proc = subprocess.Popen(
        [MIDDLE, "feedback", "t1", FEEDBACK],
        cwd=tmp_path,
        env={**base, **claude_env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert entered.wait(120), "round 2 never reached Claude Code"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        release.set()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(0.5)
    with store(tmp_path) as s:
        assert s.get_ticket("t1").status.value == "running"  # the claim's owner is dead
    # another feedback now waits for the round's next assess instead of starting a round
    stored = middle(tmp_path, "feedback", "t1", "and keep parse() pure", env=claude_env)
    assert "feedback stored" in stored.stdout and "middle resume t1" in stored.stdout
    fake_api.script.coding_agent(write_file("empty.py", "EMPTY = []\n"), done("Created empty.py."))
    fake_api.script.agent(decide(True, "Handled empty input."))
    result = middle(tmp_path, "resume", "t1", env=claude_env)
    assert "complete ticket t1" in result.stdout
    agent = [text_of(r) for r in fake_api.requests_for("agent")]
    assert sum(REVIEW in t for t in agent) == 1  # the round's plan was not asked again
    assert "and keep parse() pure" in agent[-1]  # delivered at the resumed round's assess
    with store(tmp_path) as s:
        runs = s.list_runs("t1")
        assert len(runs) == 2 and s.round_of(runs[1]["id"]) == 2  # the same round continued
        turns = s.list_turns(run_id=runs[1]["id"])
        assert [(t["turn_no"], t["status"]) for t in turns] == [(1, "done")]
        assert turns[0]["resume"]  # still Claude Code's session of round 1
        assert s.get_claim("t1") is None
    assert (worktree(tmp_path, "t1") / "empty.py").read_text() == "EMPTY = []\n"


def test_feedback_sent_while_the_ticket_runs_reaches_its_next_assess(tmp_path, fake_api, claude_env, claude_cli):
    one_ticket(tmp_path)
    entered, release = threading.Event(), threading.Event()

    def slow(body):
        entered.set()
        release.wait(120)
        return write_file("parse.py", "def parse(s):\n    return s.split()\n")(body)

    fake_api.script.agent(plan("Create parse.py."), decide(True, "Added parse.py, empty input handled."))
    fake_api.script.coding_agent(slow, done("Created parse.py."))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    proc = subprocess.Popen(
        [MIDDLE, "run", "t1"],
        cwd=tmp_path,
        env={**base, **claude_env},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert entered.wait(120), "the run never reached Claude Code"
        stored = middle(tmp_path, "feedback", "t1", FEEDBACK, env=claude_env)
        assert "feedback stored for ticket t1's run in progress" in stored.stdout
        release.set()
        output, _ = proc.communicate(timeout=300)
    finally:
        release.set()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, output
    assess = text_of(fake_api.requests_for("agent")[-1])
    assert FEEDBACK in assess
    with store(tmp_path) as s:
        assert f"The human's review: {FEEDBACK}." in s.memory_docs("t1")[0]
        assert len(s.list_runs("t1")) == 1


def test_a_round_whose_session_is_not_here_starts_a_new_one_told_the_earlier_work(
    tmp_path, fake_api, claude_env, claude_cli
):
    one_ticket(tmp_path)
    first_round(tmp_path, fake_api, claude_env)
    fake_api.script.agent(plan("Handle empty input in empty.py."), decide(True, "Handled empty input."))
    fake_api.script.coding_agent(write_file("empty.py", "EMPTY = []\n"), done("Created empty.py."))
    elsewhere = {**claude_env, "CLAUDE_CONFIG_DIR": str(tmp_path / "another-claude-config")}
    result = middle(tmp_path, "feedback", "t1", FEEDBACK, env=elsewhere)
    assert "complete ticket t1" in result.stdout, result.stdout + result.stderr
    assert "session of this ticket is not here" in result.stdout
    with store(tmp_path) as s:
        runs = s.list_runs("t1")
        turn = s.list_turns(run_id=runs[1]["id"])[0]
        assert not turn["resume"] and turn["status"] == "done"
        assert "Create parse.py that parses input." in turn["prompt"]  # told what round 1 did
        assert turn["prompt"].endswith("Handle empty input in empty.py.")
    assert (worktree(tmp_path, "t1") / "empty.py").exists()
