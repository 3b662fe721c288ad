"""`<private>...</private>` in a ticket's text and in what the agent carries from it never reach
memory (issue 38): the completion doc the ticket store keeps for a revert and the one memory
indexes are the same text, without the span."""

from __future__ import annotations

import json

from graph_helpers import RecordedBackend, add_ticket, make_config, make_orchestrator

from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, plan_reply


def test_a_tickets_private_text_is_not_in_its_completion_doc(tmp_path, project):
    reply = json.dumps({"complete": True, "summary": "Rotated the key.", "next_prompt": "",
                        "instructions": ["Use the vault <private>token hunter2</private> for it"]})
    config = make_config(tmp_path)
    with make_orchestrator(config, ScriptedAgentLLM([plan_reply("p"), reply]),
                           RecordingCodingAgent(["ok"])) as orch:
        add_ticket(orch, project, title="Rotate keys",
                   description="The old key <private>is hunter2</private> leaked.")
        assert orch.run_ticket("t1").status == "complete"
        (doc,) = orch.store.memory_docs("t1")
    assert doc == ("Ticket: Rotate keys. The old key leaked.. Rotated the key.\n"
                   "The human's instructions: Use the vault for it.")
    indexed = [args[0] for name, args in RecordedBackend.all_calls() if name == "index"]
    assert indexed == [[doc]]
