"""Offline mode's Claude Code settings (`.middle/claude-config/.claude.json`) are middle's own:
one that is not valid JSON is removed with a line naming it, and the turn runs. Before, every
turn failed with Claude Code's "Configuration error ... JSON Parse error" and a restore command."""

from __future__ import annotations

import json

import pytest
from test_review_killed import TICKET, middle

from orchestrator.testing import make_repo


@pytest.mark.parametrize("text", ['{"firstStartTime": "2026-', "[1, 2]"])
def test_a_corrupt_offline_claude_settings_file_is_replaced_and_the_ticket_runs(tmp_path, claude_cli, text):
    make_repo(tmp_path / "repo", {"app.py": "print('v1')\n"})
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "t1.md").write_text(TICKET)
    (tmp_path / "middle.toml").write_text('[project]\npath = "repo"\n[memory]\nbackend = "none"\n')
    settings = tmp_path / ".middle" / "claude-config" / ".claude.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(text)
    proc = middle(tmp_path, "run", "--fake", "t1")
    assert "complete ticket t1" in proc.stdout, proc.stdout + proc.stderr
    assert f"removed {settings}: it was not valid JSON" in " ".join(proc.stderr.split()), proc.stderr
    assert isinstance(json.loads(settings.read_text()), dict)  # Claude Code wrote a new one
