"""Three `middle feedback` at once on a complete ticket: one opens the round, the others' words
are stored for it, and every one reaches the middle agent exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from e2e_helpers import decide, done, fresh_project, plan, write_file

from orchestrator.agent.prompts import REVIEW
from orchestrator.testing.turn_processes import wait_until
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

MIDDLE = str(Path(sys.executable).with_name("middle"))
WORDS = ["also handle empty input", "keep parse() pure", "name the module parse.py"]


def _env(claude_env: dict[str, str]) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    return {**base, **claude_env}


def test_three_feedbacks_at_once_are_each_delivered_once(tmp_path, fake_api, claude_env, claude_cli):
    fresh_project(tmp_path, {"t1.md": "---\ntitle: Parse input\nproject: calc\nid: t1\n---\nWrite parse.py.\n"})
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[memory]\nsave_dir = "mem"\nbackend = "bm25"\n'
        '[coding_agent.options]\nallowed_tools = ["Read", "Write", "Edit"]\nturn_timeout_s = 120\n')
    fake_api.script.agent(plan("Create parse.py."), decide(True, "Added parse.py."))
    fake_api.script.coding_agent(
        write_file("parse.py", "def parse(s):\n    return s.split()\n"), done("Created parse.py.")
    )
    first = subprocess.run(
        [MIDDLE, "run", "t1"], cwd=tmp_path, env=_env(claude_env), text=True, capture_output=True, timeout=300
    )
    assert first.returncode == 0, first.stdout + first.stderr

    entered, release = threading.Event(), threading.Event()

    def held(body):  # the round's one turn waits until every feedback process has answered
        entered.set()
        release.wait(120)
        return write_file("empty.py", "EMPTY = []\n")(body)

    fake_api.script.agent(plan("Handle empty input in empty.py."), decide(True, "Handled empty input."))
    fake_api.script.coding_agent(held, done("Created empty.py."))
    procs = [
        subprocess.Popen(
            [MIDDLE, "feedback", "t1", words],
            cwd=tmp_path,
            env=_env(claude_env),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for words in WORDS
    ]
    try:
        # Two answer at once (stored); the round's owner waits on its held turn. Wait for those
        # two to exit (not a fixed wait on each process: the owner would use it all up).
        wait_until(lambda: sum(p.poll() is not None for p in procs) >= 2)
        stored = [(proc.returncode, *proc.communicate()) for proc in procs if proc.poll() is not None]
        assert entered.wait(120), "no process ran the round"
    finally:
        release.set()
    runner = next(p for p in procs if p.returncode is None)
    out, err = runner.communicate(timeout=300)
    assert runner.returncode == 0 and "complete ticket t1" in out, out + err
    assert len(stored) == 2
    for code, out, err in stored:
        assert code == 0 and "feedback stored" in out and "Traceback" not in err, (out, err)

    agent = [json.dumps(r.body, ensure_ascii=False) for r in fake_api.requests_for("agent")]
    revise = [t for t in agent if REVIEW in t]
    assert len(revise) == 1
    assess = agent[-1]
    opener = next(w for w in WORDS if w in revise[0])
    for words in WORDS:  # each once: the opener in the round's plan, the others at its assess
        assert (words in revise[0]) == (words == opener)
        assert (words in assess.split("Earlier rounds")[-1]) or words == opener, words
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as s:
        runs = s.list_runs("t1")
        assert [s.round_of(r["id"]) for r in runs] == [1, 2]
        assert sorted(e["text"] for e in s.feedback(runs[1]["id"])) == sorted(WORDS)
        doc = s.memory_docs("t1")[0]
        assert all(w in doc for w in WORDS)
