"""Built-in plugin registering the Claude Code worker through the same hook third parties use."""

from __future__ import annotations

from orchestrator.hookspecs import hookimpl


@hookimpl
def register_workers(register):
    from orchestrator.worker.claude_code import ClaudeCodeWorker

    register(ClaudeCodeWorker)
