"""A Claude Code turn over the per-turn timeout is killed and fails the ticket with the reason."""

from __future__ import annotations

import time

import pytest
from e2e_helpers import config, fresh_project, orchestrator, plan

pytestmark = [pytest.mark.cli, pytest.mark.slow]


def test_turn_timeout_fails_the_ticket_clearly(tmp_path, fake_api, claude_env, claude_cli):
    fresh_project(tmp_path, {"t1.md": "---\ntitle: Slow\nproject: calc\nid: t1\n---\nTake forever.\n"})
    base = config(tmp_path, memory=False)
    cfg = base.model_copy(update={"coding_agent": base.coding_agent.model_copy(
        update={"options": {**base.coding_agent.options, "turn_timeout_s": 3}})})

    def stall(body):
        time.sleep(20)  # longer than the turn timeout; the fake's thread just finishes late
        return "too late"

    fake_api.script.agent(plan("Do the slow thing."))
    fake_api.script.coding_agent(stall)
    with orchestrator(cfg, fake_api, claude_env) as orch:
        orch.sync_tickets()
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed" and "within 3 s" in outcome.reason
        assert "middle resume t1" in outcome.reason
        turn = orch.store.list_turns(ticket_id="t1")[0]
        assert turn["status"] == "error" and "within 3 s" in turn["error"]
