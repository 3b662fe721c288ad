"""CLI commands that need no model: init, graph, backends, plugins, tickets, memory, log."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    from orchestrator.cli import main as cli
    monkeypatch.setattr(cli.console, "width", 250)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMORY_SAVE_DIR", raising=False)
    return tmp_path


def invoke(*args):
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output
    return result


def test_init_writes_a_loadable_config_and_ticket(workdir):
    result = invoke("init")
    assert result.exit_code == 0
    assert (workdir / "middle.toml").exists() and (workdir / "tickets" / "hello.md").exists()
    assert "or set [agent] provider:" in " ".join(result.output.split())  # text, not console markup
    assert invoke("init").output.count("wrote") == 0  # never overwrites
    from orchestrator.config.settings import load_config
    from tickets.source import load_tickets

    cfg = load_config(workdir / "middle.toml", environ={})
    assert cfg.memory_enabled and cfg.memory.backend == "hybrid"  # the recommended general-purpose backend
    loaded = load_tickets(workdir / "tickets", workdir, default_project=cfg.project.id)
    assert loaded.errors == [] and loaded.tickets[0].title == "Add a hello module"
    assert loaded.tickets[0].project_id == cfg.project.id  # no `project:` needed


def test_graph_prints_every_node_as_mermaid():
    out = invoke("graph").output
    assert out.startswith("---") or "graph TD" in out
    for node in ("load_ticket", "recall_start", "plan", "work", "recall_turn", "assess",
                 "index_summary", "finalize", "fail"):
        assert node in out
    assert "assess -.-> work" in out and "work --> recall_turn" in out


def test_backends_and_plugins_say_where_from():
    out = invoke("backends").output
    assert "sliding_window" in out and "none" in out and "backends.sliding_window.plugin" in out
    out = invoke("plugins").output
    assert "backends.none.plugin" in out and "built-in" in out and "register_memory_backends" in out


def test_memory_add_list_search_delete_export(workdir):
    (workdir / "middle.toml").write_text('[memory]\nsave_dir = "mem"\n[project]\nid = "calc"\n')
    assert invoke("memory", "add", "Ticket: Add greeting. Wrote greet().").exit_code == 0
    assert invoke("memory", "add", "Ticket: Add farewell. Wrote farewell().").exit_code == 0
    listed = invoke("memory", "list")
    assert "Add greeting" in listed.output and "Add farewell" in listed.output
    assert str((workdir / "mem" / "calc").resolve()) in listed.output
    assert "Add greeting" in invoke("memory", "search", "greeting").output
    exported = invoke("memory", "export", "-o", "out.json")
    data = json.loads((workdir / "out.json").read_text())
    assert exported.exit_code == 0 and data["project"] == "calc" and len(data["docs"]) == 2
    assert invoke("memory", "delete", "Ticket: Add greeting. Wrote greet().").exit_code == 0
    assert invoke("memory", "delete", "not there").exit_code == 1
    assert "Add greeting" not in invoke("memory", "list").output


def test_every_hook_is_documented():
    import inspect

    from orchestrator.plugins import hookspecs
    doc = (__import__("pathlib").Path(__file__).parents[2] / "docs" / "hooks.md").read_text()
    hooks = [n for n, f in inspect.getmembers(hookspecs, inspect.isfunction)
             if hasattr(f, "middle_agent_spec")]
    assert len(hooks) >= 6
    for name in hooks:
        assert f"`{name}(" in doc, f"hook {name} is not documented in docs/hooks.md"
        assert inspect.getdoc(getattr(hookspecs, name)), f"hook {name} has no docstring"


def test_memory_commands_default_to_the_tickets_project(workdir):
    from tickets.model import Ticket
    from tickets.store import TicketStore

    (workdir / "middle.toml").write_text('[memory]\nsave_dir = "mem"\n')
    with TicketStore(workdir / ".middle" / "middle.sqlite3") as store:
        store.upsert_ticket(Ticket(id="t1", project_id="calc", title="T", project_path=str(workdir)))
    invoke("memory", "add", "a calc memory")
    assert (workdir / "mem" / "calc").is_dir()
    assert "a calc memory" in invoke("memory", "list").output
