"""With sliding_window, the middle agent reads the latest summary plus the gap, not the transcript."""

from __future__ import annotations

from graph_helpers import add_ticket

from orchestrator.config.settings import Config
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply


def test_agent_sees_summary_plus_gap_and_always_the_latest_response(tmp_path, project):
    cfg = Config(root=tmp_path, state_dir="state", agent={"max_turns": 6},
                 memory={"backend": "sliding_window", "save_dir": "mem",
                         "options": {"summarize_after_seq": 1, "background": False, "window_size": 4}})
    llm = ScriptedAgentLLM([plan_reply("Step one. Write a.py")]
                           + [decision_reply(False, next_prompt=f"Step {n}. Continue") for n in ("two", "three")]
                           + [decision_reply(True, "done")])
    worker = RecordingCodingAgent(["Wrote a.py. It has one function.", "Wrote b.py. Fine.",
                              "Wrote c.py. LATEST-DETAIL: all tests pass."])
    with Orchestrator(cfg, llm=llm, coding_agent=worker, registry=PluginRegistry(load_entry_points=False)) as orch:
        add_ticket(orch, project)
        assert orch.run_ticket("t1").status == "complete"
        run_id = orch.store.latest_run("t1")["id"]
        summaries = orch.memory._backends["demo"].summaries(f"run-{run_id}")
    assert summaries and all(s["status"] == "completed" for s in summaries)
    assert summaries[-1]["base_memory_id"] == summaries[-2]["memory_id"]  # the version chain
    last = llm.user_messages[-1]
    assert "Summary of the earlier turns:" in last and "--- Turn 1 ---" not in last
    assert "Wrote c.py. LATEST-DETAIL: all tests pass." in last  # verbatim, never only summarised
    assert "Summary" not in llm.user_messages[0]  # planning has no conversation yet
