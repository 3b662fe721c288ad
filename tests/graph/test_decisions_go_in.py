"""Decisions go in (issue 23): the completion doc keeps what was decided and why, the rejected
alternatives and the human's instructions, from the LLM's decision or the offline demo model."""

from __future__ import annotations

import json

from click.testing import CliRunner
from graph_helpers import RecordedBackend, add_ticket, make_config, make_orchestrator

from orchestrator.agent.decision import Decision, parse_reply
from orchestrator.agent.notes import read_notes
from orchestrator.agent.prompts import ASSESS_INSTRUCTIONS
from orchestrator.cli.main import main
from orchestrator.fake_api import MIDDLE_AGENT_MARKER, DemoResponder
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, plan_reply

RULES = ("Use tabs, not spaces: the linter enforces them. Do not use black; we decided against it "
         "because it rewrites whole files.")


def test_the_assess_prompt_asks_for_decisions_rejected_and_instructions():
    for word in ('"decisions"', '"rejected"', '"instructions"', "why"):
        assert word in ASSESS_INSTRUCTIONS


def test_decision_fields_are_optional_and_tolerant():
    assert parse_reply('{"complete": true, "summary": "s"}', Decision).decisions == []
    d = parse_reply(json.dumps({"complete": True, "decisions": "Kept tabs: the linter wants them",
                                "rejected": None, "instructions": ["  ", "Use tabs"]}), Decision)
    assert (d.decisions, d.rejected, d.instructions) == (["Kept tabs: the linter wants them"], [], ["Use tabs"])


def test_completion_doc_and_middle_log_show_the_decisions(tmp_path, project, monkeypatch):
    reply = json.dumps({"complete": True, "summary": "Reformatted with tabs.", "next_prompt": "",
                        "decisions": ["Kept tabs because the linter enforces them"],
                        "rejected": ["black: it rewrites whole files"],
                        "instructions": ["Use tabs, not spaces"]})
    config = make_config(tmp_path)
    with make_orchestrator(config, ScriptedAgentLLM([plan_reply("p"), reply]), RecordingCodingAgent(["ok"])) as orch:
        add_ticket(orch, project, title="Indentation", description=RULES)
        assert orch.run_ticket("t1").status == "complete"
        (doc,) = orch.store.memory_docs("t1")
    assert doc == (f"Ticket: Indentation. {RULES}. Reformatted with tabs.\n"
                   "Decided: Kept tabs because the linter enforces them.\n"
                   "Rejected: black: it rewrites whole files.\n"
                   "The human's instructions: Use tabs, not spaces.")
    indexed = [args[0] for name, args in RecordedBackend.all_calls() if name == "index"]
    assert indexed == [[doc]]
    (tmp_path / "middle.toml").write_text(f'state_dir = "{tmp_path / "state"}"\n')
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["log", "t1"])
    assert out.exit_code == 0, out.output
    assert "    decided:\n      - Kept tabs because the linter enforces them" in out.output
    assert "    rejected:\n      - black: it rewrites whole files" in out.output
    assert "    the human's instructions:\n      - Use tabs, not spaces" in out.output


def test_offline_summariser_reads_decisions_and_instructions():
    notes = read_notes("Create `a.py` with:\n```\nx = 1\n```\n" + RULES + " Sessions must expire after 30 minutes.",
                       "Created a.py. I went with a module constant because it is simplest.")
    assert notes == {
        "decisions": ["I went with a module constant because it is simplest."],
        "rejected": ["Do not use black; we decided against it because it rewrites whole files."],
        "instructions": ["Use tabs, not spaces: the linter enforces them.",
                         "Do not use black; we decided against it because it rewrites whole files.",
                         "Sessions must expire after 30 minutes."]}
    assert read_notes("Create `a.py` with:\n```\nx = 1\n```\n", "Created a.py.") == {}


def test_the_demo_model_puts_them_in_its_completion():
    from orchestrator.agent.prompts import assess_message, transcript

    ticket = {"title": "T", "description": "Create `a.py` with:\n```\nx = 1\n```\n" + RULES}
    conversation = transcript([{"turn": 1, "prompt": "Create `a.py` with:\n```\nx = 1\n```\n",
                                "response": "Created a.py."}])
    body = {"system": MIDDLE_AGENT_MARKER + ".",
            "messages": [{"role": "user", "content": assess_message(ticket, conversation, "", 1, 5)}]}
    decision = json.loads(DemoResponder().respond("agent", body).content[0]["text"])
    assert decision["complete"] is True
    assert decision["rejected"] == ["Do not use black; we decided against it because it rewrites whole files."]
    assert "Use tabs, not spaces: the linter enforces them." in decision["instructions"]
