"""Two tickets through the real graph with backend = "hindsight" (offline, no LLM): the second
recalls the first's summary, mental models come first, nothing reaches Claude Code."""

from __future__ import annotations

import re

from orchestrator.config.settings import Config
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing import make_repo
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from tickets.model import Ticket


def test_a_ticket_recalls_the_previous_tickets_summary(tmp_path):
    project = make_repo(tmp_path / "repo")
    config = Config(state_dir=str(tmp_path / "state"), root=tmp_path,
                    agent={"max_turns": 3, "max_cost_usd": 1.0},
                    memory={"backend": "hindsight", "save_dir": str(tmp_path / "memory"),
                            "options": {"embedder": "hashing", "retain_every_turns": 1}})
    llm = ScriptedAgentLLM([plan_reply("p1"), decision_reply(True, "Used tabs; the linter enforces them."),
                            plan_reply("p2"), decision_reply(True, "done two")])
    worker = RecordingCodingAgent(["Reformatted with tabs.", "Done."])
    with Orchestrator(config, llm=llm, coding_agent=worker) as orch:
        for tid, title in (("t1", "Indentation style"), ("t2", "Indentation in the new module")):
            orch.store.upsert_ticket(Ticket(id=tid, project_id="demo", title=title,
                                            description="Indent with tabs", project_path=str(project)))
            assert orch.run_ticket(tid).status == "complete"
    plan_two = llm.user_messages[2]
    assert plan_two.startswith("Project knowledge (Hindsight mental models")
    assert re.search(r"Memories invoked:\nRecent work \(newest first\):\n- [\d-]{10} \[[0-9a-f]{8}\] Ticket: "
                     r"Indentation style\. Indent with tabs\. Used tabs; the linter enforces them\.",
                     plan_two)
    assert all("Memories invoked" not in p and "Project knowledge" not in p for p in worker.prompts)
