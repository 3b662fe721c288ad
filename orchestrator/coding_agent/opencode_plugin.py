"""Built-in plugin registering the OpenCode coding agent through the same hook third parties use."""

from __future__ import annotations

from orchestrator.plugins.hookspecs import hookimpl


@hookimpl
def register_coding_agents(register):
    from orchestrator.coding_agent.opencode import OpenCodeAgent

    register(OpenCodeAgent)
