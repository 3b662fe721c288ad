"""The agent's account (issue 31): the block shows each memory's id, the decision names the
memories it relied on (`memories_used`), the run records it with why each was recalled, and
`middle log` and the usage counts show both. Through the real anthropic SDK on the fake Messages
API: its demo model (which names the memories whose words its ticket shares) and a script."""

from __future__ import annotations

import json
import re

from rich.console import Console

from orchestrator import Orchestrator
from orchestrator.cli.log_view import print_log
from orchestrator.config.settings import Config
from orchestrator.fake_api.replies import reply, text
from orchestrator.fake_api.scripted import ScriptedResponder
from orchestrator.memory.format import doc_id
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.testing.fakes import RecordingCodingAgent
from tickets.model import Ticket

GREETING = "Create `calc/greeting.py` with:\n```python\ndef greet(name):\n    return f'Hello, {name}!'\n```"
FAREWELL = ("A farewell module like the greeting module.\nCreate `calc/farewell.py` with:\n```python\n"
            "def farewell(name):\n    return f'Goodbye, {name}!'\n```")


def config(tmp_path) -> Config:
    return Config(state_dir=str(tmp_path / "state"), root=tmp_path,
                  agent={"max_turns": 3, "max_cost_usd": 1.0},
                  memory={"backend": "bm25", "save_dir": str(tmp_path / "memory")},
                  project={"isolation": "none"})


def add(orch: Orchestrator, project, ticket_id: str, title: str, description: str) -> None:
    orch.store.upsert_ticket(Ticket(id=ticket_id, project_id="calc", title=title,
                                    description=description, project_path=str(project)))


def log_text(orch: Orchestrator, ticket_id: str) -> str:
    console = Console(record=True, width=300)
    print_log(console, orch.store, ticket_id)
    return console.export_text()


def test_the_demo_model_names_the_memories_its_ticket_shares_words_with(tmp_path, project):
    worker = RecordingCodingAgent(["Created calc/greeting.py.", "Created calc/farewell.py."])
    with Orchestrator(config(tmp_path), fake=True, coding_agent=worker,
                      registry=PluginRegistry(load_entry_points=False)) as orch:
        add(orch, project, "t1", "Add a greeting module", GREETING)
        assert orch.run_ticket("t1").status == "complete"
        (greeting_doc,) = orch.store.memory_docs("t1")
        ident = doc_id(greeting_doc)[:8]
        add(orch, project, "t2", "Add a farewell module like the greeting module", FAREWELL)
        assert orch.run_ticket("t2").status == "complete"
        (turn,) = orch.store.list_turns(ticket_id="t2")
        assert f"[{ident}]" in turn["memories_invoked"]  # the block shows the id it names
        (used,) = turn["decision"]["memories_used"]
        assert used["id"] == ident and "greeting" in used["why"]
        recalls = [e["data"] for e in orch.store.list_events(ticket_id="t2") if e["kind"] == "recall"]
        assert {r["where"] for r in recalls} == {"ticket start", "turn 1"}
        shown = next(m for m in recalls[-1]["memories"] if m["id"] == ident)
        assert shown["why"].startswith("recent work") and recalls[-1]["backend"] == "bm25"
        log = log_text(orch, "t2")
        assert f"    memories used:\n      - [{ident}] it names " in log
        assert f"    why these memories:\n      [{ident}] recent work" in log
        usage = orch.store.memory_usage("calc")
        assert usage["by_memory"][ident] == {"recalled": 1, "used": 1}
        assert usage["by_backend"]["bm25"]["used"] == 1


def test_a_scripted_decision_s_memories_used_keeps_only_what_the_agent_was_shown(tmp_path, project):
    def decide(memories_used):
        return lambda body: reply(text(json.dumps({
            "complete": True, "summary": "Did it.", "next_prompt": "", "memories_used": memories_used})))

    def plan(body):
        return reply(text(json.dumps({"prompt": "Do it."})))

    script = ScriptedResponder().agent(plan, decide([]))
    worker = RecordingCodingAgent(["Done.", "Done."])
    with Orchestrator(config(tmp_path), fake=True, responder=script, coding_agent=worker,
                      registry=PluginRegistry(load_entry_points=False)) as orch:
        add(orch, project, "t1", "Cache sessions in Redis", "Sessions live in Redis; it persists.")
        assert orch.run_ticket("t1").status == "complete"
        ident = doc_id(orch.store.memory_docs("t1")[0])[:8]
        script.agent(plan, decide([{"id": f"[{ident.upper()}]", "why": "Redis was chosen before"},
                                   {"id": "deadbeef", "why": "made up"}, "also-not-shown"]))
        add(orch, project, "t2", "Expire Redis sessions", "Sessions in Redis must expire.")
        assert orch.run_ticket("t2").status == "complete"
        (turn,) = orch.store.list_turns(ticket_id="t2")
        assert turn["decision"]["memories_used"] == [{"id": ident, "why": "Redis was chosen before"}]
        assert re.search(rf"memories used:\n +- \[{ident}\] Redis was chosen before", log_text(orch, "t2"))
        (t1_turn,) = orch.store.list_turns(ticket_id="t1")
        assert "memories_used" not in t1_turn["decision"]  # none named: none recorded


def test_a_memory_fixed_between_tickets_reaches_the_next_ticket(tmp_path, project):
    """Done when: a person supersedes a wrong memory and the next ticket gets the fix (in its
    recent work, and in its related work, the old one kept as history right below it)."""
    from orchestrator.testing.fakes import ScriptedAgentLLM, decision_reply, plan_reply

    llm = ScriptedAgentLLM([plan_reply("p1"), decision_reply(True, "Sessions expire after 1 day."),
                            plan_reply("p2"), decision_reply(True, "done")])
    with Orchestrator(config(tmp_path), llm=llm, coding_agent=RecordingCodingAgent(["ok", "ok"]),
                      registry=PluginRegistry(load_entry_points=False)) as orch:
        add(orch, project, "t1", "Session timeout", "How long do sessions last?")
        assert orch.run_ticket("t1").status == "complete"
        (wrong,) = orch.store.memory_docs("t1")
        fix = "Ticket: Session timeout. Sessions expire after 7 days (the 1 day was a typo)."
        curator = orch.services.curator()
        shown = curator.show("calc", doc_id(wrong)[:8])
        assert shown["tickets"][0]["ticket_id"] == "t1" and shown["tickets"][0]["run_id"]
        curator.supersede("calc", doc_id(wrong)[:8], fix, "tester")
        add(orch, project, "t2", "Session timeout again", "How long do sessions last?")
        assert orch.run_ticket("t2").status == "complete"
    plan = llm.user_messages[2]
    assert f"[{doc_id(fix)[:8]}] {fix}" in plan  # the fix, in place of the wrong recent line
    assert "Sessions expire after 1 day." not in plan.split("Related work")[0]


def test_the_run_records_and_middle_log_show_the_ids_the_block_shows(tmp_path, project):
    """Two docs whose 8-character ids meet: the block shows each by 9 characters, and so do
    the run's recall record and `middle log`'s recall lines, each naming its own doc."""
    one, two = "Deploy note 16640: the staging cluster moved.", "Deploy note 67893: the staging cluster moved."
    assert doc_id(one)[:8] == doc_id(two)[:8]  # found by counting up
    worker = RecordingCodingAgent(["Created calc/deploy.py."])
    with Orchestrator(config(tmp_path), fake=True, coding_agent=worker,
                      registry=PluginRegistry(load_entry_points=False)) as orch:
        curator = orch.services.curator()
        curator.facade.index("calc", [one, two])
        add(orch, project, "t1", "Point deploys at the staging cluster that moved",
            "The staging cluster moved.\nCreate `calc/deploy.py` with:\n```python\nHOST = 'staging-2'\n```")
        outcome = orch.run_ticket("t1")
        assert outcome.status == "complete", outcome
        (turn,) = orch.store.list_turns(ticket_id="t1")
        ids = {doc_id(one)[:9]: one, doc_id(two)[:9]: two}
        assert all(f"[{i}]" in turn["memories_invoked"] for i in ids)
        recalls = [e["data"] for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "recall"]
        recorded = {m["id"] for r in recalls for m in r["memories"]}
        assert set(ids) <= recorded and doc_id(one)[:8] not in recorded
        log = log_text(orch, "t1")
        for ident, doc in ids.items():
            assert f"[{ident}] " in log  # under "why these memories"
            assert curator.show("calc", ident)["doc"] == doc
