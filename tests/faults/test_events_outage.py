"""Run events are durable: PostgreSQL stopped during a Claude Code turn (longer than the store's
retry window) loses none of the run's events, and they stay in order; a step whose end event a
kill -9 lost is recorded when the run is resumed."""

from __future__ import annotations

import pytest
from graph_helpers import add_ticket, make_orchestrator

from orchestrator.coding_agent.base import TurnResult
from orchestrator.config.settings import Config
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from orchestrator.testing.git import make_repo

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


class OutageWorker(RecordingCodingAgent):
    """Claude Code's turn streams progress while the store is down, then answers."""

    def __init__(self, pg_server):
        super().__init__()
        self.pg_server = pg_server

    def run_turn(self, prompt, cwd, *, session_id, resume, on_event=None):
        assert on_event is not None
        on_event({"type": "text", "text": "before the outage"})
        with self.pg_server.down():
            for n in range(3):
                on_event({"type": "text", "text": f"during the outage {n}"})
        on_event({"type": "text", "text": "after the outage"})
        (cwd / "hello.py").write_text("print('hi')\n")
        return TurnResult(session_id=session_id, text="Wrote hello.py.", cost_usd=0.01, num_turns=1, duration_ms=5)


def test_events_written_while_the_store_is_down_are_kept_in_order(tmp_path, pg_server, pg_url):
    # (reconnect_s: long enough for the connection pool's own backoff to find the server again
    # after the outage, short enough that the first event's wait ends the outage's retries)
    project = make_repo(tmp_path / "repo")
    cfg = Config(root=tmp_path, state_dir=str(tmp_path / "state"), store={"url": pg_url, "reconnect_s": 8},
                 agent={"max_turns": 3, "max_cost_usd": 1.0},
                 memory={"backend": "recorded", "save_dir": str(tmp_path / "memory")})
    llm = ScriptedAgentLLM([plan_reply("Create hello.py"), decision_reply(True, "Added hello.py.")])
    with make_orchestrator(cfg, llm, OutageWorker(pg_server)) as orch:
        add_ticket(orch, project)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "complete", outcome.reason
        events = orch.store.list_events(ticket_id="t1")
    texts = [e["data"].get("text") for e in events if e["kind"] == "coding_agent"]
    assert texts == ["before the outage", "during the outage 0", "during the outage 1", "during the outage 2",
                     "after the outage"]
    kinds = [(e["kind"], e["data"].get("node")) for e in events]
    for step in [("decision", "assess"), ("node", "commit"), ("node", "recall_turn"), ("node", "index_summary")]:
        assert step in kinds, kinds
    assert kinds[-1] == ("run_end", None)
    at = [e["at"] for e in events]
    assert at == sorted(at)  # written late, but each with the time it happened, in order
