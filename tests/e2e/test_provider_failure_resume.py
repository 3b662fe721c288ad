"""The middle agent's model failing after a finished turn, as `middle run` meets it (the provider
built from `[agent]` with a run's retries): the run fails resumable with nothing lost (the ticket's
branch and its turn kept), and `middle resume` asks the model again and completes the ticket
without redoing the turn, its cost counted once. The providers' cells of the table in
docs/providers.md ("When the model call fails") end this way; the mapping of each failure to its
line is tested per provider in tests/agent/test_provider_failures*.py."""

from __future__ import annotations

import pytest
from e2e_helpers import decide, done, fresh_project, plan, worktree, write_file

from orchestrator.config.settings import Config
from orchestrator.errors import ModelAccessError
from orchestrator.fake_api import api_error
from orchestrator.fake_api.replies import broken_reply
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.workspace.git import out

pytestmark = [pytest.mark.cli, pytest.mark.slow]

TICKET = {"t1.md": "---\ntitle: Add a notes file\nproject: calc\nid: t1\n---\nCreate notes.txt saying hello.\n"}
SOON = {"retry-after": "0.01"}

FAILURES = {
    "529-past-the-retries": ([api_error(529, "Overloaded", headers=SOON)] * 4, "answered 529 after 3 retries"),
    "not-json": ([broken_reply("<html>502 Bad Gateway</html>")], "could not be read"),
    "key-revoked": ([api_error(401, "invalid x-api-key")], "rejected the API key (401)"),
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_model_failure_after_a_turn_fails_resumable_and_resume_completes_without_redoing_the_turn(
        tmp_path, fake_api, claude_env, claude_cli, monkeypatch, failure):
    replies, needle = FAILURES[failure]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-fake-local")
    repo = fresh_project(tmp_path, TICKET)
    cfg = Config(root=tmp_path, state_dir=str(tmp_path / "state"), project={"path": "repo", "tickets_dir": "tickets"},
                 agent={"max_turns": 3, "base_url": fake_api.base_url},
                 coding_agent={"options": {"allowed_tools": ["Read", "Write", "Edit"], "turn_timeout_s": 120}})
    fake_api.script.agent(plan("Create the file notes.txt containing the word hello."), *replies)
    fake_api.script.coding_agent(write_file("notes.txt", "hello\n"), done("Created notes.txt."))
    with Orchestrator(cfg, coding_agent_env=claude_env) as orch:  # the model built from [agent], as `middle run`
        orch.sync_tickets()
        try:
            outcome = orch.run_ticket("t1")
        except ModelAccessError as exc:  # the batch stops on it (said once by `middle run`)
            assert failure == "key-revoked" and needle in str(exc)
            # failed, not put back to pending: a turn finished (what `middle resume` below continues)
            assert orch.store.latest_run("t1")["status"] == "failed"
            assert orch.store.get_ticket("t1").status.value == "failed"
        else:
            assert outcome.status == "failed" and outcome.resumable, outcome
            assert needle in outcome.reason
        assert [(t["turn_no"], t["status"]) for t in orch.store.list_turns(ticket_id="t1")] == [(1, "done")]
        run_id = orch.store.latest_run("t1")["run_id"]
        cost = orch.store.total_cost(run_id)
    assert cost > 0
    assert (worktree(tmp_path, "t1") / "notes.txt").read_text() == "hello\n"  # the turn's work kept
    assert out(repo, "branch", "--list", "middle/*").strip()  # and its branch
    coding_calls = len(fake_api.requests_for("coding_agent"))
    # The model is back: `middle resume` asks it again, and the turn is not done twice.
    fake_api.script.clear("agent")
    fake_api.script.agent(decide(True, "Created notes.txt."))
    with Orchestrator(cfg, coding_agent_env=claude_env) as orch:
        outcome = orch.resume("t1")
        assert outcome.status == "complete", outcome
        assert [(t["turn_no"], t["status"]) for t in orch.store.list_turns(ticket_id="t1")] == [(1, "done")]
        assert orch.store.total_cost(run_id) == cost == outcome.cost_usd  # counted once
    assert len(fake_api.requests_for("coding_agent")) == coding_calls
