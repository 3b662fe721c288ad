"""Tickets come in one way: `middle sync`, `middle run`, `middle tickets` and `middle serve` all load
the configured ticket source through orchestrator.running.sync, with the same rules, and a plugin
can add a source with the `register_ticket_sources` hook."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.plugin_api import LoadResult, SourceContext, TicketFileError, hookimpl
from orchestrator.plugins import manager
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.services import Services
from tickets.model import Ticket
from tickets.store import TicketStore

HUGE = 200_030  # over the default [project] max_ticket_chars of 100,000


class JsonFileSource:
    """A test plugin's source: tickets from a JSON list of {id, title, body} (a stand-in for a tracker)."""

    kind = "jsonfile"
    argument = "file"

    def __init__(self, path: Path, project_path: Path):
        self.path, self.project_path = path, project_path

    @classmethod
    def open(cls, options: dict[str, Any], context: SourceContext) -> JsonFileSource:
        return cls(context.base_dir / options["file"], context.project_path)

    @property
    def where(self) -> str:
        return str(self.path)

    def load(self) -> LoadResult:
        result = LoadResult()
        for item in json.loads(self.path.read_text()):
            if "title" not in item:
                result.errors.append(TicketFileError(f"{self.path}#{item['id']}", "no title"))
                continue
            result.tickets.append(Ticket(id=item["id"], project_id="calc", title=item["title"],
                                         description=item.get("body", ""), project_path=str(self.project_path),
                                         source=f"{self.path}#{item['id']}"))
        return result


class JsonFilePlugin:
    @hookimpl
    def register_ticket_sources(self, register):
        register(JsonFileSource)


@pytest.fixture
def with_plugin(monkeypatch) -> PluginRegistry:
    """The process's plugin registry, with the test plugin loaded (as if installed)."""
    reg = PluginRegistry(load_entry_points=False, extra_plugins=(JsonFilePlugin(),))
    monkeypatch.setattr(manager, "_REGISTRY", reg)
    return reg


def _invoke(root: Path, monkeypatch, *args: str):
    monkeypatch.chdir(root)
    for var in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def _stored(config) -> dict[str, Ticket]:
    with TicketStore(config.store_target) as store:
        return {t.id: t for t in store.list_tickets()}


def _huge_ticket(root: Path) -> None:
    (root / "tickets" / "huge.md").write_text("---\ntitle: Huge\nproject: calc\n---\n" + "x" * HUGE)


def test_the_server_refuses_an_over_long_ticket_as_the_cli_does(tmp_path, serve, project, monkeypatch):
    _huge_ticket(tmp_path)
    served = serve(project)
    body = served.client.get("/api/tickets").json()
    assert "huge" not in [t["id"] for t in body["tickets"]]
    assert any("huge.md" in p and "max_ticket_chars" in p for p in body["folder_problems"]), body
    assert "huge" not in _stored(project)
    result = _invoke(tmp_path, monkeypatch, "sync")  # the CLI's refusal, for comparison
    assert result.exit_code == 1 and "huge.md" in result.stderr and "max_ticket_chars" in result.stderr


def _plugin_project(root: Path, project) -> Path:
    (root / "backlog.json").write_text(json.dumps([
        {"id": "j1-from-json", "title": "From the JSON source", "body": "Do it."},
        {"id": "j2-long", "title": "Too long", "body": "y" * HUGE},
        {"id": "j3-untitled"},
    ]))
    config = root / "middle.toml"
    config.write_text(
        config.read_text() + '\n[tickets]\nkind = "jsonfile"\n\n[tickets.options]\nfile = "backlog.json"\n'
    )
    return config


def test_a_plugin_source_is_synced_by_middle_sync(tmp_path, project, with_plugin, monkeypatch):
    _plugin_project(tmp_path, project)
    result = _invoke(tmp_path, monkeypatch, "sync")
    stored = _stored(project)
    assert "j1-from-json" in stored and stored["j1-from-json"].title == "From the JSON source"
    assert "001-greeting" not in stored  # the Markdown folder is not read: the source is the plugin's
    assert "j2-long" not in stored and "j3-untitled" not in stored
    assert result.exit_code == 1  # per-ticket errors: the owner's length rule and the source's own
    assert "j2-long" in result.stderr and "max_ticket_chars" in result.stderr
    assert "j3-untitled" in result.stderr and "no title" in result.stderr
    assert "1 ticket(s)" in result.stdout and "1 new" in result.stdout
    listed = _invoke(tmp_path, monkeypatch, "tickets")  # the read-only list reads the same source
    assert "j1-from-json" in listed.stdout and "001-greeting" not in listed.stdout
    assert "j2-long" in listed.stderr and "max_ticket_chars" in listed.stderr


def test_a_plugin_source_is_synced_by_the_server(tmp_path, serve, project, with_plugin):
    _plugin_project(tmp_path, project)
    from orchestrator.config.settings import load_config

    config = load_config(tmp_path / "middle.toml", environ={})
    with Services(config, fake=True, registry=with_plugin) as services:
        served = serve(config, services=services)
        body = served.client.get("/api/tickets").json()
        assert [t["id"] for t in body["tickets"]] == ["j1-from-json"]
        assert any("j2-long" in p and "max_ticket_chars" in p for p in body["folder_problems"])
        served.close()


def test_middle_sync_from_names_a_source_on_the_command_line(tmp_path, project, with_plugin, monkeypatch):
    (tmp_path / "other.json").write_text(json.dumps([{"id": "o1-other", "title": "Other"}]))
    result = _invoke(tmp_path, monkeypatch, "sync", "--from", "jsonfile:other.json")
    assert result.exit_code == 0, result.output
    assert list(_stored(project)) == ["o1-other"]
    result = _invoke(tmp_path, monkeypatch, "sync", "--from", "nosuch:x")
    assert result.exit_code == 1 and result.stderr.startswith("error: unknown ticket source 'nosuch'")
    assert "jsonfile" in result.stderr and "markdown" in result.stderr


def test_middle_sync_from_markdown_reads_another_folder(tmp_path, project, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    (other / "x1-elsewhere.md").write_text("---\ntitle: Elsewhere\nproject: calc\n---\nx\n")
    result = _invoke(tmp_path, monkeypatch, "sync", "--from", "markdown:other")
    assert result.exit_code == 0, result.output
    assert list(_stored(project)) == ["x1-elsewhere"]
    both = _invoke(tmp_path, monkeypatch, "sync", "--from", "markdown:other", "--tickets", "other")
    assert both.exit_code == 2 and "not both" in both.stderr
