"""A whole ticket run with the default worker options: Claude Code cannot write outside the project."""

from __future__ import annotations

import pytest
from e2e_helpers import body_text, decide, done, fresh_project, orchestrator, plan, worktree, write_file

from orchestrator.config.settings import Config

pytestmark = [pytest.mark.cli, pytest.mark.slow]

TICKET = {"t1.md": "---\ntitle: Escape\nproject: calc\nid: t1\n---\nWrite ../outside.py and notes.txt.\n"}


def test_a_ticket_cannot_make_claude_code_write_outside_the_project(tmp_path, fake_api, claude_env, claude_cli):
    repo = fresh_project(tmp_path, TICKET)
    # Only the timeout is set: everything about permissions is the worker's default.
    cfg = Config(root=tmp_path, state_dir=str(tmp_path / "state"),
                 project={"path": "repo", "tickets_dir": "tickets"},
                 agent={"max_turns": 2, "max_cost_usd": 5.0},
                 coding_agent={"options": {"cli_path": claude_cli, "turn_timeout_s": 120}})
    fake_api.script.agent(plan("Write ../outside.py, then notes.txt."),
                          decide(True, "notes.txt written; ../outside.py was refused."))
    fake_api.script.coding_agent(write_file("../outside.py", "escaped = True\n"), write_file("notes.txt", "hi\n"),
                           done("Wrote notes.txt; writing ../outside.py was not permitted."))
    with orchestrator(cfg, fake_api, claude_env) as orch:
        assert orch.sync_tickets().errors == []
        outcome = orch.run_ticket("t1")
    assert outcome.status == "complete", outcome
    assert not (tmp_path / "outside.py").exists()
    assert not (worktree(tmp_path, "t1").parent / "outside.py").exists()  # outside the worktree
    assert (worktree(tmp_path, "t1") / "notes.txt").read_text() == "hi\n"
    assert not (repo / "notes.txt").exists()
    # Claude Code told the model the outside write was refused, and its answer reached the agent.
    after_refusal = body_text(fake_api.requests_for("coding_agent")[1])
    assert "outside.py" in after_refusal and "haven't granted it yet" in after_refusal
    assert "was not permitted" in body_text(fake_api.requests_for("agent")[1])
