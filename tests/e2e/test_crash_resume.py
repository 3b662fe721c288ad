"""Claude Code exiting 1 mid-ticket fails the ticket, keeps its turns, and `middle resume` retries."""

from __future__ import annotations

import pytest
from e2e_helpers import config, decide, done, fresh_project, orchestrator, plan, worktree, write_file

from orchestrator.fake_api import api_error

pytestmark = [pytest.mark.cli, pytest.mark.slow]


def test_failed_turn_then_resume(tmp_path, fake_api, claude_env, claude_cli):
    repo = fresh_project(tmp_path, {"t1.md": "---\ntitle: Two steps\nproject: calc\nid: t1\n---\nTwo files.\n"})
    cfg = config(tmp_path, memory=True)
    fake_api.script.agent(
        plan("Create a.txt containing a."), decide(False, next_prompt="Now create b.txt containing b.")
    )
    fake_api.script.coding_agent(write_file("a.txt", "a\n"), done("Created a.txt."), api_error(500, "scripted outage"))
    with orchestrator(cfg, fake_api, claude_env) as orch:
        orch.sync_tickets()
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed" and outcome.resumable
        assert "turn 2" in outcome.reason and "middle resume t1" in outcome.reason
        turns = orch.store.list_turns(ticket_id="t1")
        assert [(t["turn_no"], t["status"]) for t in turns] == [(1, "done"), (2, "error")]
        assert turns[1]["error"] and orch.store.get_ticket("t1").status == "failed"
        session = turns[0]["session_id"]
    # The outage is over: resume retries turn 2 only, in the same Claude Code session.
    fake_api.script.coding_agent(write_file("b.txt", "b\n"), done("Created b.txt."))
    fake_api.script.agent(decide(True, "Created a.txt and b.txt."))
    before = len(fake_api.requests_for("coding_agent"))
    with orchestrator(cfg, fake_api, claude_env) as orch:
        outcome = orch.resume("t1")
        assert outcome.status == "complete", outcome
        turns = orch.store.list_turns(ticket_id="t1")
        assert [(t["turn_no"], t["status"]) for t in turns] == [(1, "done"), (2, "done")]
        assert turns[1]["session_id"] == session and turns[1]["resume"]
    wt = worktree(tmp_path, "t1")
    assert (wt / "a.txt").read_text() == "a\n" and (wt / "b.txt").read_text() == "b\n"
    assert not (repo / "a.txt").exists()  # the user's tree is untouched until `middle merge`
    resumed = fake_api.requests_for("coding_agent")[before]
    assert "Created a.txt." in str(resumed.body["messages"])  # the resumed session remembers turn 1
