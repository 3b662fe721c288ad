"""Finding the Claude Code CLI (config, PATH, bundled wheel copy) and the options model; no CLI needed."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.claude_cli import bundled_cli, find_claude_cli
from orchestrator.coding_agent.claude_code import ClaudeCodeAgent, ClaudeCodeOptions
from orchestrator.errors import CodingAgentError


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho fake\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def no_bundled():
    return None


def test_configured_path_wins(tmp_path):
    mine = executable(tmp_path / "mine" / "claude")
    executable(tmp_path / "bin" / "claude")
    assert find_claude_cli(str(mine), path=str(tmp_path / "bin"), bundled=no_bundled) == str(mine)


def test_wrong_configured_path_is_an_error_not_a_silent_fallback(tmp_path):
    executable(tmp_path / "bin" / "claude")
    with pytest.raises(CodingAgentError, match=r"cli_path.*npm install -g @anthropic-ai/claude-code"):
        find_claude_cli(str(tmp_path / "nowhere" / "claude"), path=str(tmp_path / "bin"), bundled=no_bundled)


def test_path_then_bundled(tmp_path):
    on_path = executable(tmp_path / "bin" / "claude")
    assert find_claude_cli(None, path=str(tmp_path / "bin"), bundled=lambda: "/b/claude") == str(on_path)
    assert find_claude_cli(None, path=str(tmp_path / "empty"), bundled=lambda: "/b/claude") == "/b/claude"


def test_not_installed_says_how_to_install(tmp_path):
    with pytest.raises(CodingAgentError) as err:
        find_claude_cli(None, path=str(tmp_path), bundled=no_bundled)
    message = str(err.value)
    assert "npm install -g @anthropic-ai/claude-code" in message
    assert "pip install claude-agent-sdk" in message and "[coding_agent.options] cli_path" in message


def test_bundled_copy_is_found_in_the_sdk_package_without_importing_it(tmp_path, monkeypatch):
    package = tmp_path / "site" / "claude_agent_sdk"
    # Importing this package would raise: finding the binary must not import it.
    (package).mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    binary = executable(package / "_bundled" / "claude")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert bundled_cli() == str(binary)


def test_worker_raises_worker_error_when_cli_missing(tmp_path):
    worker = ClaudeCodeAgent(ClaudeCodeOptions(cli_path=str(tmp_path / "nope" / "claude")),
                              env={"PATH": str(tmp_path)})
    with pytest.raises(CodingAgentError, match="npm install"):
        worker.run_turn("hi", tmp_path, session_id=None, resume=False)


def test_worker_raises_for_a_missing_project_dir(tmp_path):
    with pytest.raises(CodingAgentError, match="does not exist"):
        ClaudeCodeAgent().run_turn("hi", tmp_path / "missing", session_id=None, resume=False)


def test_options_are_strict_and_have_defaults():
    with pytest.raises(ValidationError):
        ClaudeCodeOptions(permision_mode="acceptEdits")  # misspelt key
    o = ClaudeCodeOptions()
    assert (o.permission_mode, o.turn_timeout_s, o.max_turns) == ("acceptEdits", 900, None)
    assert "Write" in o.allowed_tools and o.scope_to_project is True


def test_command_uses_session_id_for_new_and_resume_for_existing_sessions():
    worker = ClaudeCodeAgent(ClaudeCodeOptions(model="m1", max_turns=3, allowed_tools=["Read", "Grep"],
                                                extra_args=["--restricted"]))
    new = worker.command("claude", Path("/p"), session_id="abc", resume=False)
    assert new[:5] == ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    for flag, value in [("--permission-mode", "acceptEdits"), ("--allowedTools", "Read"),
                        ("--model", "m1"), ("--max-turns", "3"), ("--session-id", "abc")]:
        assert new[new.index(flag) + 1] == value
    assert "--resume" not in new and new[-1] == "--restricted"
    resumed = worker.command("claude", Path("/p"), session_id="abc", resume=True)
    assert resumed[resumed.index("--resume") + 1] == "abc" and "--session-id" not in resumed
