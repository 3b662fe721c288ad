"""A review round on another machine, with the real Claude Code CLI on the fake model: machine A
runs the ticket, pushes its branch and is gone with its disk; the human's feedback on machine B
(its own clone and Claude Code config, the same PostgreSQL store) continues the branch as pushed,
in a new Claude Code session told round 1, and pushes both rounds' work."""

from __future__ import annotations

import shutil

import pytest
from e2e_helpers import decide, done, plan, team_machine, write_file

from orchestrator.fake_api.env import claude_code_env
from orchestrator.testing import make_repo
from orchestrator.workspace.git import git, out

pytestmark = [pytest.mark.cli, pytest.mark.slow, pytest.mark.postgres]

TICKET = "---\ntitle: Two files\nproject: calc\nid: t1\n---\nCreate a.txt.\n"


def machine(tmp_path, name: str, remote, pg_url: str, fake_api, claude_cli, *, sync: bool = False):
    env = claude_code_env(fake_api.base_url, tmp_path / name / "claude-config", max_retries=0)  # its own sessions
    return team_machine(tmp_path, name, remote, pg_url, fake_api, env, claude_cli, TICKET, sync=sync,
                        memory={"backend": "none"})


def test_feedback_on_another_machine_continues_the_pushed_branch(tmp_path, pg_url, fake_api, claude_cli):
    seed = make_repo(tmp_path / "seed", {"README.md": "calc\n"})
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(remote))
    fake_api.script.agent(plan("Create a.txt containing a."), decide(True, "Created a.txt."))
    fake_api.script.coding_agent(write_file("a.txt", "a\n"), done("Created a.txt."))
    with machine(tmp_path, "a", remote, pg_url, fake_api, claude_cli, sync=True) as orch:
        assert orch.run_ticket("t1").status == "complete"
        first = orch.store.latest_run("t1")
    assert out(remote, "rev-parse", "middle/t1") == first["head_commit"]
    shutil.rmtree(tmp_path / "a")  # machine A is gone, with its worktree and Claude Code sessions

    fake_api.script.agent(plan("Now create b.txt containing b."), decide(True, "Created b.txt."))
    fake_api.script.coding_agent(write_file("b.txt", "b\n"), done("Created b.txt."))
    says: list[str] = []
    with machine(tmp_path, "b", remote, pg_url, fake_api, claude_cli) as orch:
        orch.say = says.append
        outcome = orch.feedback("t1", "also add b.txt")
        assert outcome.status == "complete", outcome
        second = orch.store.latest_run("t1")
        here = tmp_path / "b" / "state" / "worktrees" / "t1"
        assert second["worktree"] == str(here) and orch.store.round_of(second["id"]) == 2
        turn = orch.store.list_turns(run_id=second["id"])[0]
        assert turn["status"] == "done" and not turn["resume"]  # a new session, told round 1
        assert "Create a.txt containing a." in turn["prompt"] and turn["prompt"].endswith(
            "Now create b.txt containing b."
        )
        assert {f["path"] for f in orch.diff("t1")["files"]} == {"a.txt", "b.txt"}
    assert sum("continues middle/t1 from its branch as pushed" in s for s in says) == 1, says
    assert any("session of this ticket is not here" in s for s in says), says
    assert out(here, "rev-parse", "HEAD~1") == first["head_commit"]
    assert out(remote, "rev-parse", "middle/t1") == second["head_commit"]
    assert out(remote, "show", "middle/t1:a.txt") == "a" and out(remote, "show", "middle/t1:b.txt") == "b"
