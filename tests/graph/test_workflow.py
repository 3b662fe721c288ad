"""The ticket workflow contract (docs/design.md), one test per rule, on the real graph."""

from __future__ import annotations

import json
import logging

import pytest
from graph_helpers import RecordedBackend, add_ticket, make_config, make_orchestrator

from orchestrator.agent.prompts import SYSTEM_PROMPT
from orchestrator.memory.format import doc_id
from orchestrator.testing.fakes import (
    RecordingCodingAgent,
    ScriptedAgentLLM,
    decision_reply,
    plan_reply,
)

PAST = "Ticket: Old work. Made hello.py print a greeting. Used f-strings; tests pass."


def one_turn_llm(summary="Wrote hello.py", first_prompt="Create hello.py please"):
    return ScriptedAgentLLM([plan_reply(first_prompt), decision_reply(True, summary)])


def test_memory_off_makes_no_memory_call_and_no_files(tmp_path, project):
    config = make_config(tmp_path, memory=False)
    llm, worker = one_turn_llm(), RecordingCodingAgent(["Created hello.py"])
    with make_orchestrator(config, llm, worker) as orch:
        add_ticket(orch, project)
        outcome = orch.run_ticket("t1")
        assert orch.memory is None
        assert orch.store.memory_docs("t1") == []
    assert outcome.status == "complete"
    assert RecordedBackend.instances == []  # the backend was never even opened
    assert not (tmp_path / "memory").exists()
    assert all(not m.startswith("Memories invoked:") for m in llm.user_messages)


def test_start_query_turn_query_and_memories_format(tmp_path, project):
    config = make_config(tmp_path)
    long_prompt = "hello " * 120 + "first prompt"  # shares words with PAST, so recall finds it
    long_response = "hello world " * 70
    llm = ScriptedAgentLLM([plan_reply(long_prompt), decision_reply(False, next_prompt="go on with hello"),
                            decision_reply(True, "all done")])
    worker = RecordingCodingAgent([long_response, "second hello response"])
    with make_orchestrator(config, llm, worker) as orch:
        orch.memory.index("demo", [PAST])
        add_ticket(orch, project, title="Add hello", description="Create hello.py")
        assert orch.run_ticket("t1").status == "complete"
    retrieves = [args for name, args in RecordedBackend.all_calls() if name == "retrieve"]
    # recall_start: exactly one query from title and description, num_to_retrieve 5
    assert retrieves[0] == (["Add hello. Create hello.py"], 5)
    # recall_turn after each turn: last prompt and latest response, 500 chars each
    assert retrieves[1] == ([f"{long_prompt[:500]}\n{long_response[:500]}"], 5)
    assert retrieves[2] == (["go on with hello\nsecond hello response"], 5)
    assert len(retrieves) == 3
    # "Memories invoked:" + docs (each with its id), then a blank line, prepended to every
    # agent user message
    for message in llm.user_messages:
        assert message.startswith(f"Memories invoked:\n[{doc_id(PAST)[:8]}] {PAST}\n\n")
    assert all(call["system"] == SYSTEM_PROMPT for call in llm.calls)
    assert "project memory" in SYSTEM_PROMPT and "Memories invoked:" in SYSTEM_PROMPT
    # the agent sees the conversation: its prompts and Claude Code's responses
    assert "second hello response" in llm.user_messages[2] and long_prompt in llm.user_messages[2]


def test_no_memories_means_no_header(tmp_path, project):
    llm = one_turn_llm()
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent(["ok"])) as orch:
        add_ticket(orch, project)
        orch.run_ticket("t1")
    assert llm.user_messages[0].startswith("Ticket: Add hello")


def test_claude_code_gets_exactly_the_agents_prompts_and_never_memory(tmp_path, project):
    llm = ScriptedAgentLLM([plan_reply("Write hello.py"), decision_reply(False, next_prompt="Add a docstring"),
                            decision_reply(True, "done")])
    worker = RecordingCodingAgent(["made it", "added"])
    with make_orchestrator(make_config(tmp_path), llm, worker) as orch:
        orch.memory.index("demo", [PAST + " hello.py"])
        add_ticket(orch, project)
        orch.run_ticket("t1")
    assert worker.prompts == ["Write hello.py", "Add a docstring"]
    assert all(PAST not in p and "Memories invoked" not in p for p in worker.prompts)
    assert "Memories invoked:" in llm.user_messages[0]  # the agent did see it
    # one session: created on turn 1, resumed on turn 2
    assert worker.calls[0]["resume"] is False and worker.calls[1]["resume"] is True
    assert worker.calls[0]["session_id"] == worker.calls[1]["session_id"]
    # Claude Code works in the ticket's own worktree, never in the user's working tree
    assert worker.calls[0]["cwd"] == str(tmp_path / "state" / "worktrees" / "t1")


def test_in_place_isolation_runs_in_the_project_directory(tmp_path, project):
    config = make_config(tmp_path)
    config.project.isolation = "none"
    worker = RecordingCodingAgent(["ok"])
    with make_orchestrator(config, one_turn_llm(), worker) as orch:
        add_ticket(orch, project)
        assert orch.run_ticket("t1").status == "complete"
        assert orch.store.latest_run("t1")["isolation"] == "none"
        assert orch.store.latest_run("t1")["branch"] is None
    assert worker.calls[0]["cwd"] == str(project)
    assert not (tmp_path / "state" / "worktrees").exists()


def test_index_summary_doc_is_exact_and_stored_for_revert(tmp_path, project):
    llm = one_turn_llm(summary="Added hello.py; learned the repo uses f-strings")
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent(["ok"])) as orch:
        add_ticket(orch, project, title="Add hello", description="Create hello.py")
        orch.run_ticket("t1")
        doc = "Ticket: Add hello. Create hello.py. Added hello.py; learned the repo uses f-strings"
        assert [a for n, a in RecordedBackend.all_calls() if n == "index"] == [([doc],)]
        assert orch.store.memory_docs("t1") == [doc]
        assert orch.memory.list_docs("demo") == [doc]
        result = orch.revert("t1")  # unmerged: revert is discard (no code reached the base branch)
        assert result.memory_docs_deleted == 1 and "changed no files" in result.message
        assert orch.memory.list_docs("demo") == []
        assert orch.store.get_ticket("t1").status == "discarded"
        assert [a for n, a in RecordedBackend.all_calls() if n == "delete"] == [([doc],)]


def test_empty_description_in_queries_and_doc(tmp_path, project):
    llm = one_turn_llm(summary="S")
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent(["ok"])) as orch:
        add_ticket(orch, project, title="T", description="")
        orch.run_ticket("t1")
        assert orch.store.memory_docs("t1") == ["Ticket: T. . S"]
    assert [a for n, a in RecordedBackend.all_calls() if n == "retrieve"][0] == (["T. "], 5)


@pytest.mark.parametrize("broken", ["retrieve", "index"])
def test_memory_errors_are_logged_and_survived(tmp_path, project, caplog, broken):
    RecordedBackend.fail_on = {broken}
    llm = one_turn_llm()
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent(["ok"])) as orch:
        add_ticket(orch, project)
        with caplog.at_level(logging.WARNING):
            outcome = orch.run_ticket("t1")
    assert outcome.status == "complete"
    text = caplog.text
    assert "disk on fire" in text and str((tmp_path / "memory" / "demo").resolve()) in text
    if broken == "retrieve":
        assert all("Memories invoked" not in m for m in llm.user_messages)


@pytest.mark.parametrize("broken", [False, True])
def test_the_log_says_whether_the_completion_doc_reached_memory(tmp_path, project, broken):
    from rich.console import Console

    from orchestrator.cli.log_view import print_log

    RecordedBackend.fail_on = {"index"} if broken else set()
    decided = json.dumps({"complete": True, "summary": "Wrote hello.py",
                          "decisions": ["hello.py prints, because a test reads stdout"]})
    llm = ScriptedAgentLLM([plan_reply("Create hello.py please"), decided])
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent(["ok"])) as orch:
        add_ticket(orch, project)
        assert orch.run_ticket("t1").status == "complete"
        console = Console(record=True, width=200)
        print_log(console, orch.store, "t1")
        # Kept with the ticket either way, so a revert deletes whatever part reached the store.
        assert orch.store.memory_docs("t1")
        doc = orch.store.memory_docs("t1")[0]
    text = console.export_text()
    if broken:
        assert "indexed to memory" not in text.replace("not indexed to memory", "")
        assert "not indexed to memory" in text and "disk on fire (index)" in text
    else:
        assert "\nindexed to memory" in text and "not indexed" not in text
    # The doc's lines after its first stay under it (a decision line is not a new entry).
    first, *rest = doc.split("\n")
    assert rest and f"\n  {first}\n" + "".join(f"    {line}\n" for line in rest) in text


def test_unreadable_memory_store_does_not_stop_the_ticket(tmp_path, project, caplog):
    config = make_config(tmp_path)
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "demo").write_text("not a directory")  # the store path is unusable
    llm = one_turn_llm()
    with make_orchestrator(config, llm, RecordingCodingAgent(["ok"])) as orch:
        add_ticket(orch, project)
        with caplog.at_level(logging.WARNING):
            outcome = orch.run_ticket("t1")
    assert outcome.status == "complete"
    assert "cannot use store" in caplog.text and str(tmp_path / "memory" / "demo") in caplog.text


def test_decision_json_is_recorded_per_turn(tmp_path, project):
    llm = ScriptedAgentLLM([plan_reply("p1"), decision_reply(False, next_prompt="p2"),
                            decision_reply(True, "sum")])
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent(["r1", "r2"])) as orch:
        add_ticket(orch, project)
        orch.run_ticket("t1")
        turns = orch.store.list_turns(ticket_id="t1")
    assert [t["prompt"] for t in turns] == ["p1", "p2"]
    assert [t["response"] for t in turns] == ["r1", "r2"]
    assert turns[0]["decision"] == {"complete": False, "summary": "", "next_prompt": "p2"}
    assert turns[1]["decision"] == {"complete": True, "summary": "sum", "next_prompt": ""}
    assert [c["schema"] for c in llm.calls] == ["Plan", "Decision", "Decision"]


def test_malformed_reply_is_repaired_once(tmp_path, project):
    llm = ScriptedAgentLLM([plan_reply("p1"), "Sure! I think it's done.", decision_reply(True, "ok")])
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent(["r1"])) as orch:
        add_ticket(orch, project)
        assert orch.run_ticket("t1").status == "complete"
    repair = llm.calls[2]["messages"]
    assert repair[1] == {"role": "assistant", "content": "Sure! I think it's done."}
    assert "could not be used" in repair[2]["content"]


def test_malformed_reply_twice_fails_clearly_and_keeps_turns(tmp_path, project):
    llm = ScriptedAgentLLM([plan_reply("p1"), "not json", "still not json"])
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent(["r1"])) as orch:
        add_ticket(orch, project)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed" and outcome.resumable
        assert "unusable twice" in outcome.reason and "still not json" in outcome.reason
        assert orch.store.get_ticket("t1").status == "failed"
        assert [t["response"] for t in orch.store.list_turns(ticket_id="t1")] == ["r1"]


def test_corrupt_sliding_window_store_does_not_stop_the_ticket(tmp_path, project, caplog):
    from orchestrator.config.settings import Config
    from orchestrator.plugins.manager import PluginRegistry
    from orchestrator.running.orchestrator import Orchestrator

    store = tmp_path / "mem" / "demo"
    store.mkdir(parents=True)
    (store / "sliding_window.sqlite3").write_bytes(b"this is not a database" * 100)
    cfg = Config(root=tmp_path, state_dir="state", memory={"backend": "sliding_window", "save_dir": "mem"})
    llm = one_turn_llm()
    with Orchestrator(cfg, llm=llm, coding_agent=RecordingCodingAgent(["ok"]),
                      registry=PluginRegistry(load_entry_points=False)) as orch:
        add_ticket(orch, project)
        with caplog.at_level(logging.WARNING):
            assert orch.run_ticket("t1").status == "complete"
    assert str(store.resolve()) in caplog.text and "recall" in caplog.text and "index" in caplog.text
    assert (store / "sliding_window.sqlite3").read_bytes().startswith(b"this is not a database")  # nothing lost
