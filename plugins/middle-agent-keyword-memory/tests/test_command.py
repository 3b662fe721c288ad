"""The plugin's own CLI command, added through the register_commands hook (loaded by entry point)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main

# The command comes through the plugin's entry point: load the installed plugins for these tests.
pytestmark = pytest.mark.usefixtures("installed_plugins")


def test_memory_keywords_command_through_the_entry_point(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMORY_SAVE_DIR", raising=False)
    (tmp_path / "middle.toml").write_text(
        '[project]\nid = "p"\n[memory]\nsave_dir = "mem"\nbackend = "keyword"\n')
    runner = CliRunner()
    for doc in ("fixed the login form", "login retries added", "csv export fixed"):
        assert runner.invoke(main, ["memory", "add", doc]).exit_code == 0
    result = runner.invoke(main, ["memory", "keywords", "-n", "2"])
    assert result.exit_code == 0, result.output
    assert sorted(line.split() for line in result.stdout.splitlines()) == [["2", "fixed"], ["2", "login"]]


def test_the_command_says_when_another_backend_is_configured(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMORY_SAVE_DIR", raising=False)
    (tmp_path / "middle.toml").write_text('[memory]\nsave_dir = "mem"\nbackend = "sliding_window"\n')
    result = CliRunner().invoke(main, ["memory", "keywords"])
    assert result.exit_code == 1 and "error:" in result.stderr and 'backend = "keyword"' in result.stderr
