"""Claude Code on the middle agent's cloud: with `[agent] provider = "bedrock"` or `"vertex"`, the
coding agent reaches Claude the same way, so a team with only Bedrock (or only Vertex) needs one
config line for both agents.

Claude Code reads its own switches for that (CLAUDE_CODE_USE_BEDROCK / CLAUDE_CODE_USE_VERTEX,
AWS_REGION / AWS_PROFILE, CLOUD_ML_REGION / ANTHROPIC_VERTEX_PROJECT_ID, ANTHROPIC_BEDROCK_BASE_URL
/ ANTHROPIC_VERTEX_BASE_URL); the credentials are the cloud's usual ones, from the environment, as
the middle agent's client reads them. An environment that already chooses Claude Code's way to
its model (any CLAUDE_CODE_USE_* set) is left as it is, and `follow_provider = false` turns this off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_CHOSEN = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")


def provider_env(agent: Any, environ: Mapping[str, str]) -> dict[str, str]:
    """Variables that put Claude Code on the middle agent's provider `agent` (an `[agent]` config),
    or {} for a provider Claude Code reaches on its own (anthropic: its key; claude-code: its login;
    openai-compatible: not Claude)."""
    if any(environ.get(name) for name in _CHOSEN):
        return {}
    if agent.provider == "bedrock":
        env = {"CLAUDE_CODE_USE_BEDROCK": "1"}
        if agent.region:
            env["AWS_REGION"] = agent.region
        if agent.aws_profile:
            env["AWS_PROFILE"] = agent.aws_profile
        if agent.base_url:
            env["ANTHROPIC_BEDROCK_BASE_URL"] = agent.base_url
        return env
    if agent.provider == "vertex":
        env = {"CLAUDE_CODE_USE_VERTEX": "1"}
        if agent.region:
            env["CLOUD_ML_REGION"] = agent.region
        if agent.project_id:
            env["ANTHROPIC_VERTEX_PROJECT_ID"] = agent.project_id
        if agent.base_url:
            env["ANTHROPIC_VERTEX_BASE_URL"] = agent.base_url
        return env
    return {}
