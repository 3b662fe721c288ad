"""Built-in plugin registering the Codex CLI coding agent (kind "codex") through the same hook third parties use."""

from __future__ import annotations

from orchestrator.plugins.hookspecs import hookimpl


@hookimpl
def register_coding_agents(register):
    from orchestrator.coding_agent.codex import CodexAgent

    register(CodexAgent)
