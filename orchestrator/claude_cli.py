"""Find the Claude Code CLI: configured path, then PATH, then the copy bundled in claude-agent-sdk.

Its own module, below the coding agents, the middle agent's providers and the fakes, which all
need it: the coding agents sit above the fakes (each one's `offline` starts its fake API), and
the fakes above the middle agent (the demo model reads its prompts)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Callable

from orchestrator.errors import CodingAgentError
from orchestrator.executables import find_executable


def install_hint(table: str = "[coding_agent.options]") -> str:
    """How to get Claude Code, naming the options table its `cli_path` is set in."""
    return ("Install Claude Code with `npm install -g @anthropic-ai/claude-code` or "
            f"`pip install claude-agent-sdk` (which bundles it), or set `{table} cli_path` in "
            "middle.toml to the `claude` executable.")


def bundled_cli() -> str | None:
    """The `claude` binary inside the claude-agent-sdk wheel, found without importing the SDK."""
    try:
        spec = importlib.util.find_spec("claude_agent_sdk")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "_bundled" / "claude"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def find_claude_cli(configured: str | None = None, *, path: str | None = None,
                    bundled: Callable[[], str | None] = bundled_cli, table: str = "[coding_agent.options]") -> str:
    """The Claude Code executable to run, or CodingAgentError saying how to install it.

    `path` is the PATH to search (default: this process's); `bundled` finds the wheel's copy
    (tests pass `lambda: None` to make "not installed" deterministic); `table`: where `cli_path`
    is set (`[coding_agents.claude-code]` for tickets that pick it, `[agent]` for the middle agent).
    """
    if configured:
        found = find_executable(configured, "claude", path=path)
        if found:
            return found
        raise CodingAgentError(f"Claude Code was not found at the configured `{table} cli_path` "
                               f"{configured!r} (no such executable). Fix or remove that setting. "
                               + install_hint(table))
    found = find_executable(None, "claude", path=path) or bundled()
    if found:
        return found
    raise CodingAgentError("Claude Code (the `claude` command) is not installed or not on PATH. " + install_hint(table))
