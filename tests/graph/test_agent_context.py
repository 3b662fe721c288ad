"""A backend's standing knowledge (agent_context) reaches the middle agent ahead of recall, never Claude Code."""

from __future__ import annotations

import re

from graph_helpers import RecordedBackend, _TestPlugin, add_ticket, make_config

from orchestrator.plugin_api import hookimpl
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply

KNOWLEDGE = "Project knowledge (mental models):\n- conventions: tabs, never spaces"


class KnowingBackend(RecordedBackend):
    name = "knowing"

    def agent_context(self) -> str:
        return KNOWLEDGE


class _Plugin:
    @hookimpl
    def register_memory_backends(self, register):
        register(KnowingBackend)


def test_standing_context_comes_before_the_memories_on_every_request(tmp_path, project):
    config = make_config(tmp_path).model_copy(deep=True)
    config.memory.backend = "knowing"
    llm = ScriptedAgentLLM([plan_reply("p1"), decision_reply(True, "done one"),
                            plan_reply("p2"), decision_reply(True, "done two")])
    worker = RecordingCodingAgent(["r1", "r2"])
    registry = PluginRegistry(load_entry_points=False, extra_plugins=(_TestPlugin(), _Plugin()))
    with Orchestrator(config, llm=llm, coding_agent=worker, registry=registry) as orch:
        add_ticket(orch, project, "t1", title="Tabs", description="indent with tabs")
        assert orch.run_ticket("t1").status == "complete"
        add_ticket(orch, project, "t2", title="Tabs again", description="indent with tabs")
        assert orch.run_ticket("t2").status == "complete"
    # Once memory exists, every middle-agent message starts with the standing knowledge...
    later = llm.user_messages[1:]
    assert all(m.startswith(KNOWLEDGE) for m in later)
    # ...followed by the recalled memories (ticket 2's plan recalls ticket 1's summary).
    # (as recent work: ticket 1 is the project's newest ticket)
    assert re.search(
        r"\n\nMemories invoked:\nRecent work \(newest first\):\n- [\d-]{10} \[[0-9a-f]{8}\] Ticket: Tabs\.",
        llm.user_messages[2],
    )
    assert all(KNOWLEDGE not in p and "Memories invoked" not in p for p in worker.prompts)
