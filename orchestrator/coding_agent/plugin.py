"""Built-in plugin registering the Claude Code coding agent through the same hook third parties use."""

from __future__ import annotations

from orchestrator.plugins.hookspecs import hookimpl


@hookimpl
def register_coding_agents(register):
    from orchestrator.coding_agent.claude_code import ClaudeCodeAgent

    register(ClaudeCodeAgent)
