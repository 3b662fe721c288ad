"""A 200 KB ticket description is capped when indexed and when recalled, with visible markers."""

from __future__ import annotations

from graph_helpers import RecordedBackend, add_ticket, make_config, make_orchestrator

from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply


def test_a_huge_description_is_cut_on_index_and_the_recalled_block_fits_the_budget(tmp_path, project):
    RecordedBackend.instances.clear()
    huge = "The billing export explained at length. " + "word " * 40_000  # ~200 KB
    config = make_config(tmp_path)
    llm = ScriptedAgentLLM([plan_reply("p1"), decision_reply(True, "did billing"),
                            plan_reply("p2"), decision_reply(True, "did billing again")])
    with make_orchestrator(config, llm, RecordingCodingAgent(["ok", "ok"])) as orch:
        add_ticket(orch, project, "t1", title="Billing export", description=huge)
        assert orch.run_ticket("t1").status == "complete"
        stored = orch.store.memory_docs("t1")
        add_ticket(orch, project, "t2", title="Billing export again", description="billing export")
        assert orch.run_ticket("t2").status == "complete"
        budget = config.memory.memories_budget_chars
        # The doc kept for revert is the very text indexed: cut, with a marker saying so.
        assert len(stored) == 1 and len(stored[0]) <= config.memory.max_doc_chars
        assert "truncated" in stored[0]
        indexed = [args[0] for name, args in RecordedBackend.all_calls() if name == "index"]
        assert indexed[0] == [stored[0]]
        # Ticket 2's plan saw the first summary as recent work, within the budget and marked
        # as cut (and not a second time as related work).
        plan_message = llm.user_messages[2]
        block = plan_message.split("\n\n", 1)[0]
        assert block.startswith("Memories invoked:\nRecent work") and len(block) <= budget
        assert block.endswith(" …") and block.count("Billing export.") == 1
        assert len(plan_message) < budget + 2_000  # not the 200 KB description, twice or once
        assert orch.revert("t1").memory_docs_deleted == 1  # revert deletes the exact (cut) string
        # The 200 KB ticket's start recall asked with its head, cut to [memory] max_query_chars
        # (a client's query that long is refused), so the recall still happened.
        queries = [q for name, args in RecordedBackend.all_calls() if name == "retrieve" for q in args[0]]
        assert len(queries[0]) == config.memory.max_query_chars == 4000
        assert queries[0].startswith("Billing export. The billing export explained")
        assert all(len(q) <= 4000 for q in queries)
