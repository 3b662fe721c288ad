"""Ways out of a failed ticket keep its work: the middle agent giving up during a correction of
the check (its work committed on its branch, the failure naming the check), then `middle
feedback` or `middle resume` continuing it to complete; a check command fixed in the config picked
up by resume; `middle run ID` refusing to start over on an earlier run's work (an edited file, an
untracked note) unless `--fresh`, which drops it and says so; `max_rounds = 0` advising something
true. The real graph, SQLite store, checkpoints, git worktrees and check processes, with the
scripted middle agent and the recording coding agent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from graph_helpers import add_ticket, make_orchestrator

from orchestrator.config.settings import Config
from orchestrator.errors import CheckCannotStart, TicketError
from orchestrator.lifecycle.next_steps import situation
from orchestrator.testing import make_repo
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from orchestrator.workspace.git import out

PY = sys.executable
OK_CHECK = f"{PY} -c \"import calc, sys; sys.exit(0 if calc.ok() else 3)\""


def config(tmp_path: Path, *, commands: list[str] | None = None, max_rounds: int = 3) -> Config:
    return Config(root=tmp_path, state_dir=str(tmp_path / "state"),
                  agent={"max_turns": 8, "max_cost_usd": 1.0}, memory={"backend": "none"},
                  check={"commands": [OK_CHECK] if commands is None else commands, "max_rounds": max_rounds})


def write(name: str, text: str):
    def act(prompt, cwd):
        (cwd / name).write_text(text)
        return f"Wrote {name}."
    return act


WRONG = write("calc.py", "def ok():\n    return False\n")
HALF = write("calc.py", "def ok():\n    return False  # half way\n")
RIGHT = write("calc.py", "def ok():\n    return True\n")


def give_up_during_a_correction(tmp_path: Path):
    """t1: turn 1 writes a wrong calc.py, the check fails, the correction's turn gets half way,
    and the middle agent gives up (neither complete nor a next prompt)."""
    repo = make_repo(tmp_path / "repo")
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py."),
                            plan_reply("Make ok() return True"), decision_reply(False, "I cannot see how.")])
    with make_orchestrator(config(tmp_path), llm, RecordingCodingAgent([WRONG, HALF])) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed"
        run = orch.store.latest_run("t1")
        assert situation(orch.store, "t1") == "failed-work"
    return repo, outcome, run


def test_a_give_up_during_a_correction_keeps_the_work_and_names_the_check_then_feedback_continues_it(tmp_path):
    repo, outcome, run = give_up_during_a_correction(tmp_path)
    assert "neither completed the ticket nor gave a next prompt" in outcome.reason
    assert f"during correction 1 of the check (`{OK_CHECK}` failed: exit 3)" in outcome.reason
    assert "its work is committed on middle/t1" in outcome.reason
    assert outcome.reason.count("its work is committed") == 1  # said once, with the branch's name
    assert "middle feedback t1" in outcome.reason and "middle resume t1" in outcome.reason
    # Committed on its branch, not only staged: the worktree is clean, the branch has the half-way file.
    assert run["head_commit"] and out(repo, "show", "middle/t1:calc.py").endswith("# half way")
    assert out(Path(run["worktree"]), "status", "--porcelain") == ""
    assert "Work in progress:" in out(repo, "log", "-1", "--format=%B", "middle/t1")
    llm = ScriptedAgentLLM([plan_reply("ok() must return True"), decision_reply(True, "ok() returns True.")])
    with make_orchestrator(config(tmp_path), llm, RecordingCodingAgent([RIGHT])) as orch:
        outcome = orch.feedback("t1", "ok() must return True")
        assert outcome.status == "complete", outcome.reason
        assert [orch.store.round_of(r["id"]) for r in orch.store.list_runs("t1")] == [1, 2]
    assert out(repo, "show", "middle/t1:calc.py") == "def ok():\n    return True"


def test_a_give_up_during_a_correction_then_resume_asks_the_middle_agent_again_and_completes(tmp_path):
    repo, _, run = give_up_during_a_correction(tmp_path)
    llm = ScriptedAgentLLM([decision_reply(False, "Another try.", "Make ok() return True, really"),
                            decision_reply(True, "ok() returns True.")])
    coder = RecordingCodingAgent([RIGHT])
    with make_orchestrator(config(tmp_path), llm, coder) as orch:
        outcome = orch.resume("t1")
        assert outcome.status == "complete", outcome.reason
        runs = orch.store.list_runs("t1")
        assert len(runs) == 1 and runs[0]["check_status"] == "passed"  # the same run, continued
        assert coder.prompts == ["Make ok() return True, really"]
    assert out(repo, "show", "middle/t1:calc.py") == "def ok():\n    return True"


def test_a_turn_limit_keeps_the_work_and_resume_with_a_higher_limit_continues(tmp_path):
    repo = make_repo(tmp_path / "repo")
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(False, "Half.", "Finish it")])
    cfg = config(tmp_path).model_copy(update={"agent": config(tmp_path).agent.model_copy(update={"max_turns": 1})})
    with make_orchestrator(cfg, llm, RecordingCodingAgent([WRONG])) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed" and "turn limit reached" in outcome.reason
        assert "its work is committed on middle/t1" in outcome.reason
    assert "return False" in out(repo, "show", "middle/t1:calc.py")
    llm = ScriptedAgentLLM([decision_reply(False, "Half.", "Finish it"), decision_reply(True, "Done.")])
    with make_orchestrator(config(tmp_path), llm, RecordingCodingAgent([RIGHT])) as orch:
        outcome = orch.resume("t1")
        assert outcome.status == "complete", outcome.reason


def test_resume_runs_the_check_command_as_fixed_in_the_config(tmp_path):
    """A check past its rounds whose command was wrong (it tests a file the ticket is not about):
    fixed in the config, the resumed run runs the command the config has now, not the checkpoint's."""
    repo = make_repo(tmp_path / "repo")
    wrong_check = f"{PY} -c \"import pathlib, sys; sys.exit(0 if pathlib.Path('nothing.txt').exists() else 1)\""
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py.")])
    with make_orchestrator(config(tmp_path, commands=[wrong_check], max_rounds=0), llm,
                           RecordingCodingAgent([RIGHT])) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
        # it fails on the base as on the work, exit 1 and no output: nothing tells them apart
        assert outcome.status == "failed" and "cannot be judged" in outcome.reason
    with make_orchestrator(config(tmp_path), ScriptedAgentLLM([]), RecordingCodingAgent([])) as orch:
        outcome = orch.resume("t1")
        assert outcome.status == "complete", outcome.reason
        ran = [e["data"]["command"] for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "check"]
        assert ran[-1] == OK_CHECK and ran.count(wrong_check) == 2  # on the base, then on the work
    assert out(repo, "show", "middle/t1:calc.py") == "def ok():\n    return True"


def test_resume_reads_the_tickets_own_check_from_its_file_again(tmp_path):
    """The ticket's own `check:` still fails after its rounds ("`middle resume` gives it more"):
    changed in its file, the resumed run reads it again."""
    import json

    repo = make_repo(tmp_path / "repo")
    tickets = tmp_path / "tickets"
    tickets.mkdir()
    ticket = tickets / "t1.md"
    head = f"---\nid: t1\ntitle: Calc\nproject: demo\npath: {repo}\n"
    ticket.write_text(f"{head}check: {json.dumps([OK_CHECK])}\n---\nWrite calc.py\n")
    cfg = config(tmp_path, commands=[], max_rounds=0)
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py.")])
    with make_orchestrator(cfg, llm, RecordingCodingAgent([WRONG])) as orch:
        loaded = orch.sync_tickets(tickets)
        assert [t.id for t in loaded.tickets] == ["t1"], loaded.errors
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed" and "middle resume t1" in outcome.reason
    passes = f"{PY} -c \"import calc\""
    ticket.write_text(f"{head}check: {json.dumps([passes])}\n---\nWrite calc.py\n")
    with make_orchestrator(cfg, ScriptedAgentLLM([]), RecordingCodingAgent([])) as orch:
        outcome = orch.resume("t1")
        assert outcome.status == "complete", outcome.reason
        ran = [e["data"]["command"] for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "check"]
        assert ran[-1] == passes


def test_run_refuses_to_start_over_on_an_earlier_runs_work_and_fresh_drops_it(tmp_path):
    repo, _, run = give_up_during_a_correction(tmp_path)
    worktree = Path(run["worktree"])
    (worktree / "calc.py").write_text("def ok():\n    return True  # my fix\n")  # the user's own edit
    (worktree / "notes.md").write_text("what I tried\n")  # and a note
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py.")])
    said: list[str] = []
    with make_orchestrator(config(tmp_path), llm, RecordingCodingAgent([RIGHT])) as orch:
        orch.say = said.append
        with pytest.raises(TicketError) as err:
            orch.run_ticket("t1")
        message = str(err.value)
        assert "middle resume t1" in message and "middle feedback t1" in message
        assert "middle run t1 --fresh" in message
        assert "uncommitted edits to calc.py" in message and "untracked notes.md" in message
        assert "1 commit(s) on middle/t1" in message
        assert (worktree / "calc.py").read_text().endswith("# my fix\n") and (worktree / "notes.md").is_file()
        assert len(orch.store.list_runs("t1")) == 1  # nothing claimed
        from orchestrator.running.batch import run_batch

        with pytest.raises(TicketError, match="--fresh"):  # `middle run t1`: the same refusal
            run_batch(orch, ["t1"], named=True)
        outcome = orch.run_ticket("t1", fresh=True)
        assert outcome.status == "complete", outcome.reason
    assert any(s.startswith("--fresh: ticket t1 starts over; dropped its earlier work: 1 commit(s)") for s in said)
    assert not (worktree / "notes.md").exists()
    assert out(repo, "show", "middle/t1:calc.py") == "def ok():\n    return True"


def test_max_rounds_0_advises_something_true(tmp_path):
    repo = make_repo(tmp_path / "repo")
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py.")])
    with make_orchestrator(config(tmp_path, max_rounds=0), llm, RecordingCodingAgent([WRONG])) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
    assert outcome.status == "failed"
    assert "0 more round" not in outcome.reason
    assert "max_rounds = 0 the middle agent corrects nothing" in outcome.reason and "middle resume t1" in outcome.reason


def test_a_check_that_cannot_run_on_the_base_then_fixed_and_run_again_runs_the_fixed_command(tmp_path):
    repo = make_repo(tmp_path / "repo")
    with make_orchestrator(config(tmp_path, commands=["no-such-test-runner --all"]), ScriptedAgentLLM([]),
                           RecordingCodingAgent([])) as orch:
        add_ticket(orch, repo)
        with pytest.raises(CheckCannotStart, match="cannot run on the base commit") as raised:
            orch.run_ticket("t1")
        assert "`middle run t1`" in str(raised.value)
        assert orch.store.get_ticket("t1").status.value == "pending"  # nothing done: nothing to resume
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py.")])
    with make_orchestrator(config(tmp_path), llm, RecordingCodingAgent([RIGHT])) as orch:
        outcome = orch.run_ticket("t1")
        assert outcome.status == "complete", outcome.reason
        ran = [e["data"]["command"] for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "check"]
        assert ran == ["no-such-test-runner --all", OK_CHECK, OK_CHECK]  # the fixed one on the base, then on the work
