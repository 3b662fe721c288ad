"""What a crash or a broken memory store must not lose: a step's end event a kill -9 left
unrecorded is written on resume (from the checkpoint history), and a completion doc memory could
not index is kept pending and indexed at the next run's start or by `middle memory retry`."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from graph_helpers import RecordedBackend, add_ticket, make_config, make_orchestrator

from orchestrator.cli.main import main
from orchestrator.errors import CodingAgentError
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from tickets.model import Ticket
from tickets.store import TicketStore


def write(name: str, text: str):
    def act(prompt, cwd):
        (cwd / name).write_text(text)
        return f"Wrote {name}."
    return act


def crash(prompt, cwd):
    raise CodingAgentError("Claude Code crashed")


def test_a_decision_event_a_kill_lost_is_recorded_on_resume(tmp_path, project):
    llm = ScriptedAgentLLM([plan_reply("Create hello.py"), decision_reply(False, next_prompt="Now add a test"),
                            decision_reply(True, "Added hello.py and its test.")])
    worker = RecordingCodingAgent([write("hello.py", "x = 1\n"), crash, write("test_hello.py", "")])
    with make_orchestrator(make_config(tmp_path), llm, worker) as orch:
        add_ticket(orch, project)
        assert orch.run_ticket("t1").status == "failed"  # turn 2 failed: resumable from there
        run_id = orch.store.latest_run("t1")["id"]
        decision = [e for e in orch.store.list_events(run_id=run_id) if e["kind"] == "decision"]
        assert len(decision) == 1 and decision[0]["data"].get("task")
        # What a kill -9 between the checkpoint after assess and its event leaves behind:
        with orch.store._write() as conn:
            conn.execute("DELETE FROM run_events WHERE id = ?", (decision[0]["id"],))
        assert orch.resume("t1").status == "complete"
        events = orch.store.list_events(run_id=run_id)
    decisions = [e for e in events if e["kind"] == "decision"]
    assert [d["data"]["decision"]["complete"] for d in decisions] == [False, True]
    assert decisions[0]["data"].get("replayed") is True and "replayed" not in decisions[1]["data"]
    replayed = [e for e in events if e["data"].get("replayed")]
    assert [e["data"]["node"] for e in replayed] == ["assess"]  # nothing else was missing
    starts = [e["id"] for e in events if e["kind"] == "run_start"]
    assert replayed[0]["id"] < starts[1]  # written before the resumed run's start


def test_a_completion_doc_memory_could_not_take_is_indexed_at_the_next_run(tmp_path, project):
    llm = ScriptedAgentLLM([plan_reply("Create hello.py"), decision_reply(True, "Added hello.py."),
                            plan_reply("Create bye.py"), decision_reply(True, "Added bye.py.")])
    worker = RecordingCodingAgent([write("hello.py", "x = 1\n"), write("bye.py", "y = 2\n")])
    RecordedBackend.fail_on = {"index"}
    try:
        with make_orchestrator(make_config(tmp_path), llm, worker) as orch:
            add_ticket(orch, project)
            assert orch.run_ticket("t1").status == "complete"
            pending = orch.store.pending_memory_docs("demo")
            assert len(pending) == 1 and "Added hello.py." in pending[0][2]
            notes = [e["data"]["text"] for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "note"]
            assert any("`middle memory retry`" in n for n in notes)
            RecordedBackend.fail_on = set()  # memory works again
            add_ticket(orch, project, tid="t2", title="Add bye", description="Create bye.py")
            assert orch.run_ticket("t2").status == "complete"
            assert orch.store.pending_memory_docs() == []
            notes = [e["data"]["text"] for e in orch.store.list_events(ticket_id="t2") if e["kind"] == "note"]
            assert any("indexed 1 earlier completion doc(s)" in n for n in notes)
            indexed = [c[1][0] for c in RecordedBackend.all_calls() if c[0] == "index"]
            assert any("Added hello.py." in d for d in indexed[0]) and len(indexed) == 2
    finally:
        RecordedBackend.fail_on = set()


def _project(tmp_path: Path) -> None:
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\nid = "p"\n[memory]\nsave_dir = "mem"\nbackend = "bm25"\n')
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as s:
        s.upsert_ticket(Ticket(id="t1", project_id="p", title="T", project_path=str(tmp_path)))
        s.add_memory_doc("t1", "p", "Ticket: Parse dates. Dates are parsed as ISO 8601.", pending=True)


def test_memory_retry_indexes_the_pending_docs_once(tmp_path, monkeypatch):
    _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    first = CliRunner().invoke(main, ["memory", "retry"])
    assert first.exit_code == 0 and "indexed 1 pending completion doc(s)" in first.output, first.output
    found = CliRunner().invoke(main, ["memory", "search", "ISO dates"])
    assert "Dates are parsed as ISO 8601." in found.output
    again = CliRunner().invoke(main, ["memory", "retry"])
    assert again.exit_code == 0 and "nothing to retry" in again.output


def test_memory_retry_on_a_broken_store_is_one_error_line_and_keeps_the_doc(tmp_path, monkeypatch):
    _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mem" / "p").mkdir(parents=True)
    (tmp_path / "mem" / "p" / "bm25.sqlite3").write_bytes(b"garbage, not a database" * 100)
    result = CliRunner().invoke(main, ["memory", "retry"])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert "still not indexed" in result.output and "middle memory retry" in result.output
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as s:
        assert len(s.pending_memory_docs()) == 1
