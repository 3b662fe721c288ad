"""`middle agents` lists the coding agents with their options and CLIs; `middle demo --agent KIND`
runs the offline demo on that agent through its `offline` (or says in one line why it cannot)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.coding_agent.claude_code import ClaudeCodeAgent
from orchestrator.errors import CodingAgentError
from orchestrator.plugins import manager
from orchestrator.plugins.hookspecs import hookimpl
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.testing.plugins import fresh_registry

pytestmark = pytest.mark.cli
SEEN: list[Any] = []  # the Offline each `offline` call yielded


class OfflineClaude(ClaudeCodeAgent):
    """Claude Code under another kind: offline, it gets a fake of its own through `offline` (the
    path every non-Messages-API agent takes), not the one the middle agent asks."""

    kind: ClassVar[str] = "claude-offline"

    @classmethod
    @contextmanager
    def offline(cls, responder: Any, workdir: Any):  # type: ignore[override]
        with ClaudeCodeAgent.offline(responder, workdir) as off:
            SEEN.append(off)
            yield off


class NoCli(ClaudeCodeAgent):
    kind: ClassVar[str] = "no-cli"

    @classmethod
    def find_cli(cls, options: Any = None, table: str = "[coding_agent.options]") -> str:
        raise CodingAgentError("`no-cli` is not installed: install it with `npm install -g no-cli@1.0.0`")


class NotOffline:
    kind: ClassVar[str] = "not-offline"
    Options = ClaudeCodeAgent.Options

    def __init__(self, options: Any = None, env: Any = None):
        pass

    def run_turn(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("never run")


class Plugin:
    @hookimpl
    def register_coding_agents(self, register):
        for cls in (OfflineClaude, NoCli, NotOffline):
            register(cls)


@pytest.fixture
def agents_plugin(monkeypatch):
    fresh_registry(monkeypatch)
    monkeypatch.setattr(manager, "_REGISTRY", PluginRegistry(load_entry_points=False, extra_plugins=(Plugin(),)))
    SEEN.clear()


def middle(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_middle_agents_lists_each_kind_with_its_options_and_cli(agents_plugin, claude_cli):
    result = middle("agents")
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    for kind in ("claude-code", "claude-offline", "no-cli", "not-offline"):
        assert kind in out
    assert "missing: `no-cli` is not installed: install it with `npm install -g no-cli@1.0.0`" in out
    assert "not checked" in out  # not-offline has no find_cli
    # Every option with its type, default and description.
    assert "turn_timeout_s" in out and "float" in out and "900" in out and "whole process group is killed" in out
    assert "[coding_agents.no-cli]" in out


def test_middle_agents_of_an_unknown_kind_is_one_error_line(agents_plugin):
    result = middle("agents", "nope")
    assert result.exit_code != 0
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: unknown coding agent kind 'nope': choose one of ")
    assert all(kind in line for kind in ("claude-code", "claude-offline", "no-cli", "not-offline"))


@pytest.mark.parametrize("kind, says", [
    ("nope", "error: unknown coding agent kind 'nope': choose one of "),
    ("not-offline", "error: coding agent 'not-offline' cannot run the offline demo: it has no `offline`"),
    ("no-cli", "error: the CLI of coding agent 'no-cli' is missing: `no-cli` is not installed: install it with "
               "`npm install -g no-cli@1.0.0`"),
])
def test_middle_demo_on_an_agent_that_cannot_run_it_is_one_error_line(agents_plugin, tmp_path, kind, says):
    result = middle("demo", "--agent", kind, "--dir", str(tmp_path / "demo"))
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(says), result.output
    assert not (tmp_path / "demo").exists()  # refused before anything was made


@pytest.mark.slow
def test_middle_demo_runs_on_the_agent_named_through_its_offline(agents_plugin, tmp_path, claude_cli):
    result = middle("demo", "--agent", "claude-offline", "--no-memory", "--dir", str(tmp_path / "demo"))
    assert result.exit_code == 0, result.output
    for tid in ("001-greeting", "002-farewell", "003-multiply"):
        assert f"complete ticket {tid}" in result.output
    assert 'kind = "claude-offline"' in (tmp_path / "demo" / "middle.toml").read_text()
    # Its own fake answered every coding-agent request (the demo model behind it), under the state dir.
    assert len(SEEN) == 1 and len(SEEN[0].requests()) >= 6
    state = tmp_path / "demo" / ".middle"
    assert SEEN[0].env["CLAUDE_CONFIG_DIR"].startswith(str(state / "offline" / "claude-offline"))
    assert (tmp_path / "demo" / "repo" / "calc" / "farewell.py").read_text().count("Goodbye") == 1


def test_every_built_in_agent_runs_offline_and_says_where_its_cli_is():
    """What `middle agents` and `middle demo --agent` rely on, for each built-in kind."""
    built_in = PluginRegistry(load_entry_points=False).coding_agents
    assert {"claude-code", "codex", "gemini", "opencode", "aider"} <= set(built_in)
    for kind, entry in built_in.items():
        assert callable(getattr(entry.cls, "offline", None)), f"{kind} has no offline"
        assert callable(getattr(entry.cls, "find_cli", None)), f"{kind} has no find_cli"
        try:
            path = entry.cls.find_cli()
        except CodingAgentError as exc:  # not installed here: the message says how to install it
            assert "install" in str(exc).lower(), exc
        else:
            assert Path(path).is_file(), (kind, path)
