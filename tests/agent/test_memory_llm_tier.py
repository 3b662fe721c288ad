"""Memory summaries use the separately configured cheaper model, through the same SDK client."""

from __future__ import annotations

import json

from orchestrator.agent.llm import AnthropicLLM
from orchestrator.config.settings import Config
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing import make_repo
from orchestrator.testing.fakes import RecordingCodingAgent
from tickets.model import Ticket


def test_sliding_window_summarises_with_the_memory_model(tmp_path, fake_api):
    make_repo(tmp_path / "repo")
    cfg = Config(root=tmp_path, state_dir="state",
                 memory={"backend": "sliding_window", "save_dir": "mem", "llm_model": "claude-haiku-5-5",
                         "options": {"summarize_after_seq": 1, "background": False}})
    fake_api.script.agent(json.dumps({"prompt": "Write a.py"}),
                          json.dumps({"complete": True, "summary": "wrote a.py"}))
    fake_api.script.aux("SUMMARY FROM THE CHEAP MODEL")
    llm = AnthropicLLM("claude-sonnet-5-5", base_url=fake_api.base_url, api_key="sk-x", max_retries=0)
    with Orchestrator(cfg, llm=llm, coding_agent=RecordingCodingAgent(["Wrote a.py."]),
                      registry=PluginRegistry(load_entry_points=False)) as orch:
        orch.store.upsert_ticket(Ticket(id="t1", project_id="p", title="A", project_path=str(tmp_path / "repo")))
        assert orch.run_ticket("t1").status == "complete"
    aux = fake_api.requests_for("aux")
    assert aux and aux[0].body["model"] == "claude-haiku-5-5"
    assert "Wrote a.py." in json.dumps(aux[0].body)  # the round it summarised
    assert {r.body["model"] for r in fake_api.requests_for("agent")} == {"claude-sonnet-5-5"}
    assert "SUMMARY FROM THE CHEAP MODEL" in fake_api.requests_for("agent")[1].body["messages"][0]["content"]
