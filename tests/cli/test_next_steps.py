"""The next-step table: every command it suggests works in the situation it is suggested for, and
every refusal quotes it (no advice that sends the user in a circle).

Each case builds a ticket's situation for real (SQLite store, checkpoints, git worktrees, the
graph), with the scripted middle agent and recording worker standing in for the model and Claude
Code, then runs the suggested command through the Python API the CLI command calls.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.coding_agent.base import TurnResult
from orchestrator.config.settings import Config
from orchestrator.errors import RunInterrupted, TicketError
from orchestrator.lifecycle.next_steps import ANY, SITUATIONS, TABLE, advice, command, situation, started_as
from orchestrator.lifecycle.run_lifecycle import RUNNABLE
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing import make_repo
from orchestrator.testing.fakes import RecordingCodingAgent, decision_reply, plan_reply
from tickets.model import Ticket

TRIED = ("run", "resume", "merge", "discard", "revert", "feedback")


@pytest.fixture(autouse=True)
def _plain_invocation(monkeypatch):
    """Advice as for `middle CMD` with no --config or --fake, whatever ran before in this process."""
    from orchestrator.lifecycle import next_steps
    monkeypatch.setattr(next_steps, "_STARTED_AS", {"config": None, "fake": False})


class AgentLLM:
    """Plans one prompt, then decides `complete` (or gives up, with `finish=False`)."""

    def __init__(self, finish: bool = True):
        self.finish = finish

    def complete(self, system: str, messages: list[dict[str, str]], schema: Any) -> str:
        if schema.__name__ == "Plan":
            return plan_reply("write it")
        return decision_reply(True, "done") if self.finish else decision_reply(False)


def _write(name: str, text: str):
    def write(prompt: str, cwd: Path) -> str:
        (cwd / name).write_text(text)
        return "wrote it"
    return write


def _stop(prompt: str, cwd: Path) -> str:
    raise RunInterrupted("stopped by SIGTERM")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


class Case:
    """A project with one ticket `t`, and an Orchestrator whose worker follows `script`."""

    def __init__(self, tmp_path: Path, isolation: str = "worktree"):
        self.tmp_path = tmp_path
        self.repo = make_repo(tmp_path / "repo", {"README.md": "sample\n"})
        self.config = Config(root=tmp_path, state_dir=str(tmp_path / "state"),
                             project={"path": "repo", "isolation": isolation},
                             agent={"max_turns": 3, "max_cost_usd": 5.0},
                             memory={"backend": "none"})

    def orch(self, script: list[Any] | None = None, finish: bool = True) -> Orchestrator:
        orch = Orchestrator(self.config, llm=AgentLLM(finish), coding_agent=RecordingCodingAgent(script or ["ok"]))
        orch.store.upsert_ticket(Ticket(id="t", project_id="demo", title="T", description="Do it.",
                                        project_path=str(self.repo)))
        return orch


def make_situation(name: str, tmp_path: Path) -> Case:
    """A ticket `t` in the named situation (see orchestrator.lifecycle.next_steps.SITUATIONS)."""
    case = Case(tmp_path, isolation="none" if name == "in-place" else "worktree")
    if name == "failed-check":  # its check (a.py, once there, must say 2) fails, no rounds to correct it
        check = (f"{sys.executable} -c \"import pathlib, sys; a = pathlib.Path('a.py'); "
                 f"sys.exit(0 if not a.exists() or 'x = 2' in a.read_text() else 1)\"")
        case.config = case.config.model_copy(update={"check": case.config.check.model_copy(
            update={"commands": [check], "max_rounds": 0})})
    scripts: dict[str, list[Any]] = {
        "interrupted": [_stop],
        "failed-resumable": [TurnResult(session_id=None, text="", is_error=True, error="boom", exit_code=1)],
        "complete-empty": ["nothing to do"],
        "conflict": [_write("README.md", "theirs\n")],
        "failed": ["nothing changed"],  # gives up with no work: ended for good
    }
    script = scripts.get(name, [_write("a.py", "x = 1\n")])
    with case.orch(script, finish=name not in ("failed", "failed-work")) as orch:  # (failed-work: gives up after a.py)
        if name == "running":
            orch.store.claim_new_run("t", RUNNABLE)  # this live process holds it
        elif name == "stale":
            orch.store.claim_new_run("t", RUNNABLE, pid=_dead_pid())
        elif name == "interrupted":
            with pytest.raises(KeyboardInterrupt):
                orch.run_ticket("t")
        elif name != "pending":
            orch.run_ticket("t")
        if name == "failed-round":  # round 2 gives up; round 1's work stays on the branch
            with case.orch(["more"], finish=False) as giving_up:
                assert giving_up.feedback("t", "more").status == "failed"
        if name == "conflict":
            (case.repo / "README.md").write_text("ours\n")
            subprocess.run(["git", "commit", "-qam", "ours"], cwd=case.repo, check=True)
            orch.merge("t")
        elif name in ("merged", "reverted"):
            orch.merge("t")
        if name == "discarded":
            orch.discard("t")
        elif name == "reverted":
            orch.revert("t")
        assert situation(orch.store, "t") == name
    return case


def perform(case: Case, cmd: str) -> None:
    """Run a suggested `middle ...` command through the API the CLI command calls."""
    words = shlex.split(cmd.strip("`"))
    assert words[0] == "middle" and "--config" not in words
    name, args = words[1], words[2:]
    ticket_id = next(a for a in args if not a.startswith("-"))
    with case.orch() as orch:
        if name == "merge" and "--despite-check" in args:
            orch.merge(ticket_id, despite_check=args[args.index("--despite-check") + 1], by="a person")
        elif name == "run":
            orch.run_ticket(ticket_id, rerun="--rerun" in args, fresh="--fresh" in args)
        elif name == "resume":
            orch.resume(ticket_id)
        elif name in ("merge", "discard", "revert", "diff"):
            getattr(orch, name)(ticket_id)
        elif name == "log":
            assert orch.store.list_runs(ticket_id)
        elif name == "feedback":
            orch.feedback(ticket_id, "what to change")
        else:
            pytest.fail(f"the table suggests a command this test does not know: {cmd}")


def _suggested(situation_name: str) -> list[tuple[str, str]]:
    """Every distinct (situation, command) the table suggests."""
    commands = set()
    for (sit, tried), _text in TABLE.items():
        if sit == situation_name:
            commands.update(re.findall(r"`middle [^`]+`", advice(sit, "t", tried)))
    return [(situation_name, c) for c in sorted(commands)]


def test_the_table_covers_every_situation():
    assert {sit for sit, tried in TABLE if tried == ANY} == set(SITUATIONS)
    assert {tried for _, tried in TABLE} <= {ANY, *TRIED}


@pytest.mark.parametrize("sit, cmd", [p for s in SITUATIONS for p in _suggested(s)])
def test_every_suggested_command_is_accepted_in_its_situation(tmp_path, sit, cmd):
    case = make_situation(sit, tmp_path)
    try:
        perform(case, cmd)
    except TicketError as exc:
        pytest.fail(f"{cmd}, suggested for a {sit} ticket, was refused: {exc}")


@pytest.mark.parametrize("tried", TRIED)
@pytest.mark.parametrize("sit", SITUATIONS)
def test_a_refused_command_suggests_what_the_table_says(tmp_path, sit, tried):
    case = make_situation(sit, tmp_path)
    try:
        perform(case, command(tried, "t"))
    except TicketError as exc:
        if sit == "running" and tried != "run":  # resume, merge, ... of a running ticket: wait
            assert "running" in str(exc) or "being worked" in str(exc)
            return
        assert advice(sit, "t", tried) in str(exc)


def test_advice_repeats_the_config_and_fake_the_process_was_started_with():
    assert command("resume", "t1") == "`middle resume t1`"
    assert command("resume", "t1", fake=True) == "`middle resume t1 --fake`"
    started_as(config="other dir/middle.toml", fake=True)
    assert command("run", "t1") == "`middle --config 'other dir/middle.toml' run t1 --fake`"
    assert command("merge", "t1") == "`middle --config 'other dir/middle.toml' merge t1`"


def test_despite_check_on_a_ticket_that_did_not_fail_on_its_check_is_refused_not_merged(tmp_path):
    """`middle merge ID --despite-check "why"` on a complete ticket: refused (an `error:` at the CLI),
    nothing merged, rather than a plain merge that drops the person's reason unsaid."""
    case = make_situation("complete", tmp_path)
    with case.orch() as orch:
        with pytest.raises(TicketError, match="did not fail on its check, so --despite-check does not apply"):
            orch.merge("t", despite_check="the test is flaky", by="a person")
        assert situation(orch.store, "t") == "complete"
        assert not [e for e in orch.store.list_events(ticket_id="t") if "check_overridden" in e["data"]]
