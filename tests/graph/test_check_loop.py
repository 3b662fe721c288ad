"""Done means the project's checks pass: the check loop through the real graph, store, git
worktrees and check processes, with the scripted middle agent and the recording coding agent.

A check passes, fails and is corrected in the next turn, times out, cannot start (an error, not a
round), already fails on the base (the ticket passes when it is no worse), runs out of rounds (the
ticket fails with its work committed, and feedback or resume continue it); a ticket's `check:`
front matter; worktree setup and copy, whose files are never committed."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from graph_helpers import add_ticket, make_orchestrator

from orchestrator.config.settings import Config
from orchestrator.errors import CheckCannotStart
from orchestrator.testing import make_repo
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from orchestrator.workspace.git import out

PY = sys.executable
# A check of the ticket's file: passes when calc.py defines ok() returning True.
OK_CHECK = f"{PY} -c \"import calc, sys; sys.exit(0 if calc.ok() else 3)\""


def config(tmp_path: Path, *, commands: list[str] | None = None, max_rounds: int = 3, timeout_s: float = 60,
           worktree: dict | None = None) -> Config:
    return Config(root=tmp_path, state_dir=str(tmp_path / "state"),
                  agent={"max_turns": 6, "max_cost_usd": 1.0}, memory={"backend": "none"},
                  check={"commands": [OK_CHECK] if commands is None else commands, "max_rounds": max_rounds,
                         "timeout_s": timeout_s},
                  worktree=worktree or {})


def write(name: str, text: str):
    def act(prompt, cwd):
        (cwd / name).write_text(text)
        return f"Wrote {name}."
    return act


def checks(store, ticket_id: str = "t1") -> list[dict]:
    return [e["data"] for e in store.list_events(ticket_id=ticket_id) if e["kind"] == "check"]


def test_a_passing_check_lets_the_ticket_complete(tmp_path):
    repo = make_repo(tmp_path / "repo")
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py.")])
    with make_orchestrator(
        config(tmp_path), llm, RecordingCodingAgent([write("calc.py", "def ok():\n    return True\n")])
    ) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "complete", outcome.reason
        run = orch.store.latest_run("t1")
        assert (run["check_status"], run["corrections"]) == ("passed", 0)
        events = checks(orch.store)
    assert [(e["phase"], e.get("outcome")) for e in events] == [("base", None), ("check", "passed")]
    assert events[0]["exit_code"] != 0 and events[1]["exit_code"] == 0  # the base has no calc.py


def test_a_failing_check_goes_back_to_the_agent_and_the_next_turn_fixes_it(tmp_path):
    repo = make_repo(tmp_path / "repo")
    llm = ScriptedAgentLLM(
        [
            plan_reply("Write calc.py"),
            decision_reply(True, "Wrote calc.py."),
            plan_reply("Make ok() return True"),
            decision_reply(True, "Fixed ok()."),
        ]
    )
    coder = RecordingCodingAgent(
        [write("calc.py", "def ok():\n    return False\n"), write("calc.py", "def ok():\n    return True\n")]
    )
    with make_orchestrator(config(tmp_path), llm, coder) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "complete", outcome.reason
        run = orch.store.latest_run("t1")
        assert (run["check_status"], run["corrections"]) == ("passed", 1)
        events = checks(orch.store)
        assert [(e["phase"], e.get("outcome"), e.get("round")) for e in events] == [
            ("base", None, None),
            ("check", "failed", 1),
            ("check", "passed", 2),
        ]
        assert out(repo, "show", "middle/t1:calc.py") == "def ok():\n    return True"
    correction = llm.user_messages[2]  # what the middle agent read of the failure
    assert "The project's checks failed" in correction and OK_CHECK in correction and "Exit code: 3" in correction
    assert coder.prompts == ["Write calc.py", "Make ok() return True"]


def test_max_rounds_fails_the_ticket_with_its_work_committed_then_feedback_continues_it(tmp_path):
    repo = make_repo(tmp_path / "repo")
    wrong = write("calc.py", "def ok():\n    return False\n")
    llm = ScriptedAgentLLM(
        [
            plan_reply("Write calc.py"),
            decision_reply(True, "Wrote calc.py."),
            plan_reply("Fix ok()"),
            decision_reply(True, "Fixed, I think."),
        ]
    )
    with make_orchestrator(config(tmp_path, max_rounds=1), llm, RecordingCodingAgent([wrong, wrong])) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed" and outcome.resumable
        assert f"check `{OK_CHECK}` still failing after 1 round(s)" in outcome.reason
        assert "middle feedback t1" in outcome.reason and "middle resume t1" in outcome.reason
        run = orch.store.latest_run("t1")
        assert run["check_status"] == "failed" and run["head_commit"]  # the work is on its branch
        assert "return False" in out(repo, "show", "middle/t1:calc.py")
        from orchestrator.lifecycle.next_steps import situation

        assert situation(orch.store, "t1") == "failed-check"
    # The human's words start a round on the branch, which fixes it.
    llm2 = ScriptedAgentLLM([plan_reply("ok() must return True"), decision_reply(True, "ok() returns True.")])
    with make_orchestrator(
        config(tmp_path, max_rounds=1), llm2, RecordingCodingAgent([write("calc.py", "def ok():\n    return True\n")])
    ) as orch:
        outcome = orch.feedback("t1", "ok() must return True")
        assert outcome.status == "complete", outcome.reason
        assert [orch.store.round_of(r["id"]) for r in orch.store.list_runs("t1")] == [1, 2]


def test_resume_gives_a_ticket_failed_by_its_check_more_rounds(tmp_path):
    repo = make_repo(tmp_path / "repo")
    wrong = write("calc.py", "def ok():\n    return False\n")
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py.")])
    with make_orchestrator(config(tmp_path, max_rounds=0), llm, RecordingCodingAgent([wrong])) as orch:
        add_ticket(orch, repo)
        assert orch.run_ticket("t1").status == "failed"
    llm2 = ScriptedAgentLLM([plan_reply("Make ok() return True"), decision_reply(True, "Fixed.")])
    coder = RecordingCodingAgent([write("calc.py", "def ok():\n    return True\n")])
    with make_orchestrator(config(tmp_path, max_rounds=1), llm2, coder) as orch:
        outcome = orch.resume("t1")
        assert outcome.status == "complete", outcome.reason
        run = orch.store.latest_run("t1")
        assert (run["check_status"], run["corrections"], run["check_budget"]) == ("passed", 1, 1)
        assert len(orch.store.list_runs("t1")) == 1  # the same run continued


def test_a_check_that_times_out_is_a_failure_that_says_so(tmp_path):
    repo = make_repo(tmp_path / "repo")
    slow = f'{PY} -c "import time; time.sleep(30)"'
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py.")])
    cfg = config(tmp_path, commands=[slow], max_rounds=0, timeout_s=1)
    with make_orchestrator(cfg, llm, RecordingCodingAgent([write("calc.py", "x = 1\n")])) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed" and "timed out after" in outcome.reason
        final = checks(orch.store)[-1]
        assert final["timed_out"] and final["exit_code"] is None and "was stopped" in final["tail"]


def test_a_check_that_cannot_start_is_an_error_not_a_round(tmp_path):
    repo = make_repo(tmp_path / "repo")
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py.")])
    cfg = config(tmp_path, commands=["no-such-test-runner --all"])
    with make_orchestrator(cfg, llm, RecordingCodingAgent([write("calc.py", "x = 1\n")])) as orch:
        add_ticket(orch, repo)
        # The user's config mistake, raised as an error of its own (a batch goes on with the others);
        # the ticket is left pending, so `middle run t1` takes it once the command is fixed.
        with pytest.raises(CheckCannotStart) as raised:
            orch.run_ticket("t1")
        said = str(raised.value)
        assert "cannot run on the base commit (exit 127" in said
        assert "fix [check] commands in the config" in said and "`middle run t1`" in said
        assert orch.store.get_ticket("t1").status.value == "pending"
        # Met at the base check, before any turn: nothing paid for, no result kept as a baseline.
        assert llm.calls == []
        run = orch.store.latest_run("t1")
        assert orch.store.check_baseline(run["base_commit"], "no-such-test-runner --all") is None
        assert [e.get("outcome") for e in checks(orch.store)] == ["cannot-run"]


def test_a_check_that_already_fails_on_the_base_passes_when_no_worse(tmp_path):
    tests = textwrap.dedent("""\
        import calc


        def test_known_bug():
            assert False, "a bug the project already has"


        def test_new_feature():
            assert calc.ok()
    """)
    repo = make_repo(tmp_path / "repo", {"test_calc.py": tests, "calc.py": "def ok():\n    return False\n"})
    pytest_check = f"{PY} -m pytest -q -p no:cacheprovider test_calc.py"
    llm = ScriptedAgentLLM([plan_reply("Make ok() return True"), decision_reply(True, "ok() returns True.")])
    with make_orchestrator(
        config(tmp_path, commands=[pytest_check]),
        llm,
        RecordingCodingAgent([write("calc.py", "def ok():\n    return True\n")]),
    ) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "complete", outcome.reason
        base, after = checks(orch.store)
        assert base["failing"] == ["test_calc.py::test_known_bug", "test_calc.py::test_new_feature"]
        assert after["outcome"] == "no-worse" and after["already_failing"] == ["test_calc.py::test_known_bug"]
        assert after["label"] == "no worse (1 already failing on the base: test_calc.py::test_known_bug)"
        assert after["tests_run"] == 2
        run = orch.store.latest_run("t1")
        assert (run["check_status"], run["check_note"]) == (
            "no-worse", "1 already failing on the base: test_calc.py::test_known_bug")
        notes = [e["data"]["text"] for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "note"]
        assert any("already fails on the base commit" in n for n in notes)
        assert orch.store.check_baseline(orch.store.latest_run("t1")["base_commit"], pytest_check)["exit_code"] == 1


def test_a_new_failure_on_a_failing_base_goes_back_to_the_agent(tmp_path):
    tests = (
        "def test_known_bug():\n    assert False\n\n\ndef test_other():\n    import calc\n    assert calc.VALUE == 1\n"
    )
    repo = make_repo(tmp_path / "repo", {"test_calc.py": tests, "calc.py": "VALUE = 1\n"})
    pytest_check = f"{PY} -m pytest -q -p no:cacheprovider test_calc.py"
    llm = ScriptedAgentLLM([plan_reply("Set VALUE to 2"), decision_reply(True, "VALUE is 2.")])
    with make_orchestrator(
        config(tmp_path, commands=[pytest_check], max_rounds=0),
        llm,
        RecordingCodingAgent([write("calc.py", "VALUE = 2\n")]),
    ) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed"
        final = checks(orch.store)[-1]
        assert final["new_failures"] == ["test_calc.py::test_other"]
        assert final["already_failing"] == ["test_calc.py::test_known_bug"]


def test_a_tickets_own_check_replaces_the_config_and_an_empty_one_skips_it(tmp_path):
    from tickets.model import Ticket

    repo = make_repo(tmp_path / "repo")
    llm = ScriptedAgentLLM(
        [
            plan_reply("Write a.txt"),
            decision_reply(True, "Wrote a.txt."),
            plan_reply("Write b.txt"),
            decision_reply(True, "Wrote b.txt."),
        ]
    )
    coder = RecordingCodingAgent([write("a.txt", "a\n"), write("b.txt", "b\n")])
    own = f"{PY} -c \"import pathlib, sys; sys.exit(0 if pathlib.Path('a.txt').exists() else 1)\""
    with make_orchestrator(config(tmp_path), llm, coder) as orch:  # [check]: calc.ok(), which fails here
        orch.store.upsert_ticket(
            Ticket(id="t1", project_id="p", title="A", project_path=str(repo), fields={"check": [own]})
        )
        orch.store.upsert_ticket(
            Ticket(id="t2", project_id="p", title="B", project_path=str(repo), fields={"check": []})
        )
        assert orch.run_ticket("t1").status == "complete"
        assert [e["command"] for e in checks(orch.store, "t1")] == [own, own]
        assert orch.run_ticket("t2").status == "complete"
        assert checks(orch.store, "t2") == []


def test_setup_and_copy_make_the_worktree_able_to_run_the_check_and_are_never_committed(tmp_path):
    repo = make_repo(tmp_path / "repo", {".gitignore": "build/\n"})
    (repo / ".env").write_text("TOKEN=local\n")  # untracked: only in the user's folder
    setup = f"{PY} -c \"import pathlib; pathlib.Path('venv-marker').write_text('made by setup')\""
    env_check = (f"{PY} -c \"import pathlib, sys; "
                 f"sys.exit(0 if pathlib.Path('.env').exists() and pathlib.Path('venv-marker').exists() else 1)\"")
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py.")])
    cfg = config(tmp_path, commands=[env_check], worktree={"copy": [".env"], "setup": [setup]})
    with make_orchestrator(cfg, llm, RecordingCodingAgent([write("calc.py", "x = 1\n")])) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "complete", outcome.reason
        committed = out(repo, "show", "--name-only", "--format=", "middle/t1").split()
        assert committed == ["calc.py"]  # not .env, not what setup made
        setups = [e["data"] for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "setup"]
        assert [s["command"] for s in setups] == [setup] and setups[0]["exit_code"] == 0


def test_a_failed_setup_fails_the_ticket_before_any_turn_with_its_output(tmp_path):
    repo = make_repo(tmp_path / "repo")
    broken = f"{PY} -c \"import sys; print('pip: no such package'); sys.exit(2)\""
    llm = ScriptedAgentLLM([])
    cfg = config(tmp_path, worktree={"setup": [broken]})
    coder = RecordingCodingAgent([])
    with make_orchestrator(cfg, llm, coder) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed" and "worktree setup" in outcome.reason and "failed" in outcome.reason
        assert coder.calls == [] and llm.calls == []
        setups = [e["data"] for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "setup"]
        assert "pip: no such package" in setups[0]["tail"]


def test_what_a_check_leaves_untracked_is_removed_and_not_committed(tmp_path):
    repo = make_repo(tmp_path / "repo")
    litter = f"{PY} -c \"import pathlib; pathlib.Path('report.xml').write_text('<x/>')\""
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py.")])
    with make_orchestrator(
        config(tmp_path, commands=[litter]), llm, RecordingCodingAgent([write("calc.py", "x = 1\n")])
    ) as orch:
        add_ticket(orch, repo)
        assert orch.run_ticket("t1").status == "complete"
        assert out(repo, "show", "--name-only", "--format=", "middle/t1").split() == ["calc.py"]


def test_a_ticket_whose_check_must_pass_is_not_excused_by_the_base(tmp_path):
    """A bug report with its failing repro (`check_must_pass: true`): the repro fails on the base
    too, but the ticket is done only when it passes; a turn that leaves it failing is corrected."""
    from tickets.model import Ticket

    repro = "import calc\n\n\ndef test_repro():\n    assert calc.VALUE == 2\n"
    repo = make_repo(tmp_path / "repo", {"test_repro.py": repro, "calc.py": "VALUE = 1\n"})
    pytest_check = f"{PY} -m pytest -q -p no:cacheprovider test_repro.py"
    llm = ScriptedAgentLLM([plan_reply("Look at VALUE"), decision_reply(True, "Looked."),
                            plan_reply("Set VALUE to 2"), decision_reply(True, "VALUE is 2.")])
    coder = RecordingCodingAgent([write("notes.txt", "VALUE looks fine\n"), write("calc.py", "VALUE = 2\n")])
    with make_orchestrator(config(tmp_path, commands=[]), llm, coder) as orch:
        orch.store.upsert_ticket(Ticket(id="t1", project_id="p", title="VALUE is wrong", project_path=str(repo),
                                        fields={"check": [pytest_check], "check_must_pass": True}))
        outcome = orch.run_ticket("t1")
        assert outcome.status == "complete", outcome.reason
        run = orch.store.latest_run("t1")
        assert (run["check_status"], run["corrections"]) == ("passed", 1)
        events = checks(orch.store)
        # No base run to excuse the repro: the first check fails as the ticket's own failure.
        assert [(e["phase"], e.get("outcome")) for e in events] == [("check", "failed"), ("check", "passed")]
        assert events[0]["new_failures"] == ["test_repro.py::test_repro"]
        assert orch.store.check_baseline(run["base_commit"], pytest_check) is None
        notes = [e["data"]["text"] for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "note"]
        assert any("must pass" in n for n in notes)
