"""langgraph.json names an importable factory that builds the ticket graph with the project's services."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from orchestrator.graph import build_graph

ROOT = Path(__file__).resolve().parents[2]


def load_factory():
    """Resolve the entry the way LangGraph Server does: `./file.py:attr`, relative to langgraph.json."""
    config = json.loads((ROOT / "langgraph.json").read_text())
    assert "." in config["dependencies"]
    path, attr = config["graphs"]["ticket"].split(":")
    spec = importlib.util.spec_from_file_location("middle_langgraph_entry", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, attr)


def test_the_entry_imports_and_compiles_the_ticket_graph():
    graph = load_factory()({"configurable": {}})
    drawn = graph.get_graph()
    expected = build_graph().compile().get_graph()
    assert set(drawn.nodes) == set(expected.nodes)
    assert {(e.source, e.target) for e in drawn.edges} == {(e.source, e.target) for e in expected.edges}
    assert "index_summary" in graph.get_graph().draw_mermaid()


@pytest.mark.cli
def test_the_entry_runs_a_ticket_on_the_fake_model(project, claude_cli, monkeypatch):
    monkeypatch.setenv("MIDDLE_CONFIG", str(project.source))
    monkeypatch.chdir(project.root)
    graph = load_factory()({"configurable": {"fake": True}})
    state = graph.invoke({"ticket_id": "001-greeting"})
    assert state["status"] == "complete" and state["run_id"]
    from tickets.store import TicketStore

    with TicketStore(project.db_path) as store:
        assert store.get_ticket("001-greeting").status.value == "complete"
        assert store.get_claim("001-greeting") is None
        kinds = [e["kind"] for e in store.list_events(run_id=state["run_id"])]
        assert store.get_run(state["run_id"])["offline"] == 1  # its made-up cost is kept apart
    assert kinds[0] == "run_start" and kinds[-1] == "run_end" and "decision" in kinds
    assert (project.state_path / "worktrees" / "001-greeting" / "calc" / "greeting.py").is_file()
    assert not (project.root / "repo" / "calc" / "greeting.py").exists()  # merged only on request
    assert os.environ["MIDDLE_CONFIG"] == str(project.source)


def test_a_failing_run_through_the_entry_fires_the_hook_and_releases_the_claim(project, monkeypatch):
    """The LangGraph Server path ends runs through the same owner as the CLI (it used to skip
    on_ticket_failed and keep the claim for its whole lease)."""
    import shutil

    from orchestrator.lifecycle import run_lifecycle as lifecycle
    from tickets.store import TicketStore

    fired = []
    real = lifecycle.call_hook
    monkeypatch.setattr(lifecycle, "call_hook", lambda hooks, name, **kw: (fired.append(name), real(hooks, name, **kw)))
    monkeypatch.setenv("MIDDLE_CONFIG", str(project.source))
    monkeypatch.chdir(project.root)
    shutil.rmtree(project.root / "repo" / ".git")  # not a repository any more: load_ticket fails
    graph = load_factory()({"configurable": {"fake": True}})
    with pytest.raises(Exception, match="not in a git repository"):
        graph.invoke({"ticket_id": "002-farewell"})
    assert fired == ["on_ticket_failed"]
    with TicketStore(project.db_path) as store:
        assert store.get_ticket("002-farewell").status.value == "failed"
        assert store.get_claim("002-farewell") is None
        run = store.latest_run("002-farewell")
        ends = [e for e in store.list_events(run_id=run["id"]) if e["kind"] == "run_end"]
        assert len(ends) == 1 and ends[0]["data"]["status"] == "failed"


@pytest.mark.cli
def test_a_node_the_server_runs_again_after_the_run_ended_writes_no_second_end(project, claude_cli, monkeypatch):
    """LangGraph Server runs a thread again from its own last checkpoint after a restart: a kill
    after the ending node stored the run's end, before the server's checkpoint, runs `finalize`
    again. It must not write a second run_end or claim the run again; any other node of the
    completed run is refused rather than reopening it."""
    from orchestrator.errors import TicketError
    from orchestrator.running.langgraph_entry import BoundServices, bind_services
    from tickets.store import TicketStore

    monkeypatch.setenv("MIDDLE_CONFIG", str(project.source))
    monkeypatch.chdir(project.root)
    state = load_factory()({"configurable": {"fake": True}}).invoke({"ticket_id": "001-greeting"})
    assert state["status"] == "complete"

    def ends() -> list[dict]:
        with TicketStore(project.db_path) as store:
            return [e for e in store.list_events(run_id=state["run_id"]) if e["kind"] == "run_end"]

    assert len(ends()) == 1
    restarted = BoundServices(fake=True)  # a new server process: it holds no run
    try:
        nodes = bind_services(build_graph(), restarted).nodes
        again = nodes["finalize"].runnable.func(dict(state))  # type: ignore[attr-defined]
        assert again == {"status": "complete", "reason": ""}
        with pytest.raises(TicketError, match="already completed"):
            nodes["work"].runnable.func(dict(state))  # type: ignore[attr-defined]
    finally:
        restarted.close()
    assert len(ends()) == 1
    with TicketStore(project.db_path) as store:
        assert store.get_run(state["run_id"])["status"] == "complete"
        assert store.get_ticket("001-greeting").status.value == "complete"
        assert store.get_claim("001-greeting") is None
