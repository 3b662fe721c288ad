"""A store outage longer than the run's lease during `work` (PostgreSQL stopped): the run ends
`interrupted` (no runner took it over, so it is not "lost"), its run_end written once the store is
back, and `middle resume` does not run the finished Claude Code turn again: the turn's work and
result were committed to its local work-in-progress ref before any store call."""

from __future__ import annotations

import threading

import pytest
from graph_helpers import add_ticket, make_orchestrator

from orchestrator.coding_agent.base import TurnResult
from orchestrator.config.settings import Config
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from orchestrator.testing.git import make_repo

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

LEASE_S = 6.0


class FinishesAsTheStoreGoes(RecordingCodingAgent):
    """Claude Code's turn writes its file and answers just as the store goes down; the store
    comes back after longer than the lease."""

    def __init__(self, pg_server):
        super().__init__()
        self.pg_server = pg_server
        self.up = threading.Event()

    def run_turn(self, prompt, cwd, *, session_id, resume, on_event=None):
        self.calls.append({"prompt": prompt})
        (cwd / "hello.py").write_text("print('hi')\n")
        outage = self.pg_server.down()
        outage.__enter__()

        def back() -> None:  # past the lease: the heartbeat gives the claim up meanwhile
            threading.Event().wait(LEASE_S * 1.5)
            outage.__exit__(None, None, None)
            self.up.set()

        threading.Thread(target=back, daemon=True).start()
        return TurnResult(session_id=session_id, text="Wrote hello.py.", cost_usd=0.01, num_turns=1, duration_ms=5)


def test_an_outage_past_the_lease_interrupts_the_run_and_resume_does_not_run_the_turn_again(
        tmp_path, pg_server, pg_url):
    # (reconnect_s: long enough for the connection pool's own backoff to find the server again
    # after the outage, as in test_events_outage.py)
    project = make_repo(tmp_path / "repo")
    cfg = Config(root=tmp_path, state_dir=str(tmp_path / "state"), store={"url": pg_url, "reconnect_s": 8},
                 run={"lease_s": LEASE_S}, agent={"max_turns": 3, "max_cost_usd": 1.0}, memory={"save_dir": None})
    coder = FinishesAsTheStoreGoes(pg_server)
    llm = ScriptedAgentLLM([plan_reply("Create hello.py"), decision_reply(True, "Added hello.py.")])
    with make_orchestrator(cfg, llm, coder) as orch:
        add_ticket(orch, project)
        outcome = orch.run_ticket("t1")
        assert coder.up.wait(60)
        assert outcome.status == "interrupted", outcome
        assert "taken over" not in outcome.reason and "out of reach" in outcome.reason
        run = orch.store.latest_run("t1")
        assert [e["kind"] for e in orch.store.list_events(run_id=run["id"])].count("run_end") == 1

        resumed = orch.resume("t1")
        assert resumed.status == "complete", resumed.reason
        turns = orch.store.list_turns(run_id=run["id"])
        events = orch.store.list_events(run_id=run["id"])
    assert len(coder.calls) == 1  # the finished turn never ran again
    assert [(t["turn_no"], t["status"], t["cost_usd"]) for t in turns] == [(1, "done", 0.01)]
    kinds = [e["kind"] for e in events]
    assert kinds.count("run_start") == 2 and kinds.count("run_end") == 2  # one of each per attempt
    assert resumed.commit
