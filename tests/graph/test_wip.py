"""Nothing lost on takeover: after every turn the worktree's state is committed to
`refs/middle/wip/<ticket>` (never the ticket's branch) and pushed; a runner on another machine
that takes the run over continues from it. The step from "the agent said complete" to "the
commit is on the branch and pushed" is a node a takeover re-runs. Machine A is a real process
killed with SIGKILL at a chosen step; machine B is this one (its own clone and state, another
MIDDLE_HOSTNAME, the team's PostgreSQL store)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from graph_helpers import add_ticket, make_config, make_orchestrator

from orchestrator.config.settings import Config
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from orchestrator.workspace.git import git, out
from tickets.store import TicketStore

pytestmark = [pytest.mark.postgres]

TICKET = "---\ntitle: Two steps\nproject: calc\nid: t1\n---\nTwo files.\n"
LEASE_S = 2.0

# Machine A: the same graph, store and git as B, on scripted fakes of the two models; it kills
# itself (SIGKILL: no cleanup, no handler) at the step named by `die`.
MACHINE_A = r"""
import json, os, signal, sys
from pathlib import Path
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
sys.path.insert(0, {tests!r})
from test_wip import machine

die = {die!r}

def write(rel, text):
    def turn(prompt, cwd):
        (Path(cwd) / rel).write_text(text)
        return f"Wrote {{rel}}."
    return turn

def killed(prompt, cwd):
    os.kill(os.getpid(), signal.SIGKILL)

if die.startswith("node "):  # at the start of that node (as the runner records it), one-turn ticket
    from orchestrator.running.events import EventRecorder
    started = EventRecorder.node_started
    def node_started(self, name, *a, **k):
        if name == die[len("node "):]:
            os.kill(os.getpid(), signal.SIGKILL)
        return started(self, name, *a, **k)
    EventRecorder.node_started = node_started
    llm = ScriptedAgentLLM([plan_reply("Create a.txt"), decision_reply(True, "Created a.txt.")])
    coder = RecordingCodingAgent([write("a.txt", "a\n")])
elif die == "turn 2":  # turn 1 wrote a.txt (never committed); A dies in turn 2
    llm = ScriptedAgentLLM([plan_reply("Create a.txt"), decision_reply(False, next_prompt="Now b.txt")])
    coder = RecordingCodingAgent([write("a.txt", "a\n"), killed])
else:  # the agent says complete; A commits, and dies before the push
    llm = ScriptedAgentLLM([plan_reply("Create a.txt"), decision_reply(True, "Created a.txt.")])
    coder = RecordingCodingAgent([write("a.txt", "a\n")])
    from orchestrator.workspace.worktrees import Worktrees
    Worktrees.push = lambda self, ws: os.kill(os.getpid(), signal.SIGKILL)
with machine(Path({home!r}), Path({remote!r}), {pg_url!r}, llm, coder) as orch:
    orch.sync_tickets()
    orch.run_ticket("t1")
"""


def machine(home: Path, remote: Path, pg_url: str, llm: Any, coder: Any) -> Orchestrator:
    """One machine of a team: its own clone of `remote` ([project] repo_url), ticket folder and
    state, the team's PostgreSQL store (ticket claims and checkpoints)."""
    if not (home / "repo").exists():
        git(home.parent, "clone", "--quiet", str(remote), str(home / "repo"))
        (home / "tickets").mkdir()
        (home / "tickets" / "t1.md").write_text(TICKET)
    cfg = Config(root=home, state_dir=str(home / "state"), store={"url": pg_url},
                 project={"path": "repo", "tickets_dir": "tickets", "repo_url": str(remote), "base_branch": "main"},
                 agent={"max_turns": 4, "max_cost_usd": 5.0}, run={"lease_s": LEASE_S},
                 memory={"save_dir": None})
    return Orchestrator(cfg, llm=llm, coding_agent=coder, project_override=str(home / "repo"))


def _machine_a_dies(tmp_path: Path, remote: Path, pg_url: str, die: str) -> None:
    script = MACHINE_A.format(tests=str(Path(__file__).parent), die=die, home=str(tmp_path / "a"),
                              remote=str(remote), pg_url=pg_url)
    proc = subprocess.run([sys.executable, "-c", script], env={**_env(), "MIDDLE_HOSTNAME": "machine-a"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-3000:]


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "MIDDLE_HOSTNAME"}


def _after_the_lease(pg_url: str) -> None:
    """Wait until A's claim has run out by the database's clock (A's host is another machine:
    only the lease says it is gone)."""
    with TicketStore(pg_url) as store:
        deadline = time.monotonic() + 30
        while (claim := store.get_claim("t1")) is not None and not claim.expired:
            assert time.monotonic() < deadline, "the dead machine's lease never ran out"
            time.sleep(0.2)


def test_a_turns_uncommitted_edits_reach_the_runner_that_takes_over(tmp_path, team, pg_url, monkeypatch):
    _machine_a_dies(tmp_path, team, pg_url, "turn 2")
    # Turn 1's file was never committed on A: only its work-in-progress ref has it.
    assert out(team, "show", "refs/middle/wip/t1:a.txt") == "a"
    assert git(team, "rev-parse", "--verify", "--quiet", "refs/heads/middle/t1", check=False).returncode != 0
    _after_the_lease(pg_url)

    monkeypatch.setenv("MIDDLE_HOSTNAME", "machine-b")
    seen: dict[str, Any] = {}

    def turn_two(prompt, cwd):
        seen["a.txt"] = (Path(cwd) / "a.txt").read_text() if (Path(cwd) / "a.txt").exists() else None
        (Path(cwd) / "b.txt").write_text("b\n")
        return "Wrote b.txt."

    llm = ScriptedAgentLLM([decision_reply(True, "Created a.txt and b.txt.")])
    says: list[str] = []
    with machine(tmp_path / "b", team, pg_url, llm, RecordingCodingAgent([turn_two])) as orch:
        orch.say = says.append
        outcome = orch.resume("t1")
        assert outcome.status == "complete", outcome
        assert len(orch.store.list_runs("t1")) == 1
    assert seen["a.txt"] == "a\n"  # turn 2 on B began with what turn 1 did on A
    assert any("with its work in progress of the last turn" in s for s in says), says
    assert out(team, "show", "middle/t1:a.txt") == "a" and out(team, "show", "middle/t1:b.txt") == "b"
    # The ticket's commit holds it now: the work-in-progress ref is gone from the shared repository.
    assert git(team, "rev-parse", "--verify", "--quiet", "refs/middle/wip/t1", check=False).returncode != 0


def test_killed_between_complete_and_the_push_the_takeover_commits_and_pushes(tmp_path, team, pg_url,
                                                                              monkeypatch):
    _machine_a_dies(tmp_path, team, pg_url, "push")
    # A committed on its disk and died: nothing of the ticket's branch reached the team.
    assert git(team, "rev-parse", "--verify", "--quiet", "refs/heads/middle/t1", check=False).returncode != 0
    _after_the_lease(pg_url)

    monkeypatch.setenv("MIDDLE_HOSTNAME", "machine-b")
    coder = RecordingCodingAgent([])
    with machine(tmp_path / "b", team, pg_url, ScriptedAgentLLM([]), coder) as orch:
        outcome = orch.resume("t1")
        assert outcome.status == "complete", outcome
        run = orch.store.latest_run("t1")
        events = orch.store.list_events(run_id=run["id"])
    assert coder.calls == []  # no turn ran again
    assert outcome.commit and run["head_commit"] == outcome.commit
    assert out(team, "rev-parse", "refs/heads/middle/t1") == outcome.commit
    assert out(team, "show", "middle/t1:a.txt") == "a"
    assert [e["kind"] for e in events].count("run_end") == 1
    assert json.dumps([e for e in events if e["kind"] == "run_end"][0]["data"]).count("complete") >= 1



def test_a_turns_work_is_saved_locally_and_discard_removes_it(tmp_path, project):
    def turn(prompt, cwd):
        (Path(cwd) / "draft.txt").write_text("half done\n")
        return "Started."

    from orchestrator.coding_agent.base import TurnResult

    crashed = TurnResult(session_id=None, text="", is_error=True, error="boom", exit_code=1)
    config = make_config(tmp_path, memory=False)
    llm = ScriptedAgentLLM([plan_reply("Start it"), decision_reply(False, next_prompt="Go on")])
    with make_orchestrator(config, llm, RecordingCodingAgent([turn, crashed])) as orch:
        add_ticket(orch, project)
        assert orch.run_ticket("t1").status == "failed"  # Claude Code failed in turn 2 (resumable)
        # Not on the ticket's branch (nothing was committed there), but kept under the wip ref.
        assert out(project, "show", "refs/middle/wip/t1:draft.txt") == "half done"
        assert out(project, "rev-parse", "refs/middle/wip/t1^") == out(project, "rev-parse", "middle/t1")
        orch.discard("t1", force=True)
    assert git(project, "rev-parse", "--verify", "--quiet", "refs/middle/wip/t1", check=False).returncode != 0


def test_a_foreign_or_broken_work_in_progress_ref_is_not_restored(tmp_path, project):
    """Stored state is untrusted: a wip ref of another run, or a commit with no parent, is left
    alone (the takeover starts from the branch as it is)."""
    from orchestrator.workspace import wip
    from orchestrator.workspace.worktrees import Worktrees

    trees = Worktrees(tmp_path / "worktrees")
    ws = trees.prepare("t1", project)
    (Path(ws.path) / "a.txt").write_text("a\n")
    wip.save(trees, ws, "t1", "run-1", 1)
    assert wip.restore(trees, ws, "t1", "another-run") is None
    tree = out(project, "rev-parse", "HEAD^{tree}")
    orphan = git(project, "commit-tree", tree, "-m", "middle: work in progress of ticket t1\n\nrun run-2, after turn 1",
                 env={"GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x", "GIT_COMMITTER_NAME": "x",
                      "GIT_COMMITTER_EMAIL": "x@x"}).stdout.strip()
    git(project, "update-ref", "refs/middle/wip/t1", orphan)
    assert wip.restore(trees, ws, "t1", "run-2") is None
