"""Built-in plugin registering the Claude Code worker through the same hook third parties use."""

from __future__ import annotations

from orchestrator.plugins.hookspecs import hookimpl


@hookimpl
def register_workers(register):
    from orchestrator.coding_agent.claude_code import ClaudeCodeWorker

    register(ClaudeCodeWorker)
