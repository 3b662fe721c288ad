"""The ticket source contract suite, run over the built-in Markdown folder source."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.plugin_api import SourceContext, TicketSourceContract, TicketSpec
from tickets.source import MarkdownFolderSource


class MarkdownBacklog:
    """A folder of Markdown tickets, written as a user would."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def add(self, spec: TicketSpec) -> None:
        deps = f"depends_on: [{', '.join(spec.depends_on)}]\n" if spec.depends_on else ""
        (self.folder / f"{spec.id}.md").write_text(
            f"---\ntitle: \"{spec.title}\"\nproject: {spec.project}\n{deps}---\n{spec.description}\n",
            encoding="utf-8")

    def add_broken(self, name: str) -> None:
        (self.folder / f"{name}.md").write_text("no front matter here\n", encoding="utf-8")

    def source(self, context: SourceContext) -> MarkdownFolderSource:
        return MarkdownFolderSource.open({"folder": str(self.folder)}, context)


class TestMarkdownFolderSource(TicketSourceContract):
    source_class = MarkdownFolderSource

    @pytest.fixture
    def backlog(self, tmp_path: Path) -> MarkdownBacklog:
        return MarkdownBacklog(tmp_path / "tickets")


def test_the_folder_defaults_to_project_tickets_dir_and_a_relative_one_starts_at_the_config(tmp_path):
    context = SourceContext(base_dir=tmp_path, tickets_dir=tmp_path / "tickets", project_path=tmp_path,
                            max_ticket_chars=100)
    assert MarkdownFolderSource.open({}, context).where == str((tmp_path / "tickets").resolve())
    assert MarkdownFolderSource.open({"folder": "other"}, context).where == str((tmp_path / "other").resolve())


def test_an_unknown_option_is_a_config_error(tmp_path):
    from orchestrator.errors import ConfigError

    context = SourceContext(base_dir=tmp_path, tickets_dir=tmp_path, project_path=tmp_path, max_ticket_chars=100)
    with pytest.raises(ConfigError, match="unknown option.*fodler.*Allowed options: folder"):
        MarkdownFolderSource.open({"fodler": "x"}, context)
