"""A run taken over on another machine: machine A does turn 1, pushes its work and is gone with
its disk; machine B (its own clone, the same PostgreSQL store) continues the same run at turn 2
in a worktree of its own clone, from the ticket's pushed branch, in a new Claude Code session
told what turn 1 did."""

from __future__ import annotations

import shutil

import pytest
from e2e_helpers import decide, done, plan, team_machine, write_file

from orchestrator.fake_api import api_error
from orchestrator.testing import make_repo
from orchestrator.workspace.git import git, out

pytestmark = [pytest.mark.cli, pytest.mark.slow, pytest.mark.postgres]

TICKET = "---\ntitle: Two steps\nproject: calc\nid: t1\n---\nTwo files.\n"


def machine(tmp_path, name: str, remote, pg_url: str, fake_api, claude_env, claude_cli, *, sync: bool = False):
    return team_machine(tmp_path, name, remote, pg_url, fake_api, claude_env, claude_cli, TICKET, sync=sync)


def test_turn_two_continues_on_another_machine_from_the_pushed_branch(tmp_path, pg_url, fake_api, claude_env,
                                                                      claude_cli):
    seed = make_repo(tmp_path / "seed", {"README.md": "calc\n"})
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(remote))
    fake_api.script.agent(
        plan("Create a.txt containing a."), decide(False, next_prompt="Now create b.txt containing b.")
    )
    fake_api.script.coding_agent(
        write_file("a.txt", "a\n"), done("Created a.txt."), api_error(500, "machine A goes down")
    )
    with machine(tmp_path, "a", remote, pg_url, fake_api, claude_env, claude_cli, sync=True) as orch:
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed" and outcome.resumable, outcome
        run = orch.store.latest_run("t1")
        turns = orch.store.list_turns(run_id=run["id"])
        assert [(t["turn_no"], t["status"]) for t in turns] == [(1, "done"), (2, "error")]
    # What turn 1 did reached the shared repository (a commit pushed from machine A's worktree).
    git(run["worktree"], "add", "-A")
    git(run["worktree"], "-c", "user.name=a", "-c", "user.email=a@a", "commit", "--quiet", "-m", "turn 1")
    git(run["worktree"], "push", "--quiet", str(remote), "middle/t1:refs/heads/middle/t1")
    shutil.rmtree(tmp_path / "a")  # machine A is gone, and its disk with it

    fake_api.script.coding_agent(write_file("b.txt", "b\n"), done("Created b.txt."))
    fake_api.script.agent(decide(True, "Created a.txt and b.txt."))
    before = len(fake_api.requests_for("coding_agent"))
    says: list[str] = []
    with machine(tmp_path, "b", remote, pg_url, fake_api, claude_env, claude_cli) as orch:
        orch.say = says.append
        outcome = orch.resume("t1")
        assert outcome.status == "complete", outcome
        runs = orch.store.list_runs("t1")
        assert len(runs) == 1 and runs[0]["worktree"] == str(tmp_path / "b" / "state" / "worktrees" / "t1")
        turns = orch.store.list_turns(run_id=run["id"])
        assert [(t["turn_no"], t["status"]) for t in turns] == [(1, "done"), (2, "done")]
        assert not turns[1]["resume"] and turns[1]["session_id"] != turns[0]["session_id"]
    assert any(f"took over the run begun in {run['worktree']}" in s and "its branch as pushed" in s for s in says), says
    resumed = str(fake_api.requests_for("coding_agent")[before].body["messages"])
    assert "Create a.txt containing a." in resumed and "Now create b.txt containing b." in resumed
    # Both turns' files are on the ticket's branch, pushed back to the shared repository.
    assert out(remote, "show", "middle/t1:a.txt") == "a" and out(remote, "show", "middle/t1:b.txt") == "b"
