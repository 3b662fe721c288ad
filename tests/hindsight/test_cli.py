"""`middle memory recall|reflect|forget|models`, added through the register_commands hook."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from backends.retrieval.cache import CACHE_ENV
from orchestrator.cli.main import main


@pytest.fixture(autouse=True)
def _cache_through_xdg(tmp_path, monkeypatch):
    # MIDDLE_AGENT_CACHE_DIR (the embedding cache's variable) reads as an [agent] key to the
    # config loader's MIDDLE_* overrides, so the CLI refuses it: point the cache through XDG.
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


CONFIG = ('[project]\nid = "p"\n[memory]\nsave_dir = "mem"\nbackend = "hindsight"\n'
          '[memory.options]\nembedder = "hashing"\n')


def test_recall_reflect_forget_and_models(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMORY_SAVE_DIR", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    (tmp_path / "middle.toml").write_text(CONFIG)
    runner = CliRunner()
    for doc in ("Ticket: Login. Fixed the login form trimming on 3 May 2023.",
                "Ticket: Export. The CSV export escapes \x1b[31mquotes\x1b[0m now."):
        added = runner.invoke(main, ["memory", "add", doc])
        assert added.exit_code == 0, added.output
    result = runner.invoke(main, ["memory", "recall", "login form", "--budget", "1", "--json"])
    assert result.exit_code == 0, result.output
    (fact,) = json.loads(result.stdout)["facts"]
    assert "login form" in fact["text"] and fact["when"] == "3 May 2023"
    shown = runner.invoke(main, ["memory", "recall", "csv export quotes"])
    assert shown.exit_code == 0 and "\x1b" not in shown.stdout and "\\x1b[31m" in shown.stdout
    reflected = runner.invoke(main, ["memory", "reflect", "What did we fix in the login form?"])
    assert reflected.exit_code == 0 and "login form" in reflected.stdout
    assert runner.invoke(main, ["memory", "forget", str(fact["id"])]).exit_code == 0
    again = runner.invoke(main, ["memory", "forget", str(fact["id"])])
    assert again.exit_code == 1 and "no fact" in again.stderr
    models = runner.invoke(main, ["memory", "models"])
    assert models.exit_code == 0 and "### project conventions (v" in models.stdout


def test_the_commands_say_when_another_backend_is_configured(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMORY_SAVE_DIR", raising=False)
    (tmp_path / "middle.toml").write_text('[memory]\nsave_dir = "mem"\nbackend = "bm25"\n')
    result = CliRunner().invoke(main, ["memory", "reflect", "anything?"])
    assert result.exit_code == 1 and 'backend = "hindsight"' in result.stderr
