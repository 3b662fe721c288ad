"""The one owner of a coding agent's settings as a run uses them: its options table, and its options
and environment with `[agent] provider` followed (a class's optional `follow_provider`, base.py).

`middle run` builds the agent from these (services.py) and `middle doctor`, the local-model note and
the reachability probe read them (doctor.py), so the two can never follow the provider to
different places. It sits at the orchestrator root, beside services and doctor, importing neither.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.config.settings import Config

__all__ = ["Followed", "coding_agent_options", "followed"]


def coding_agent_options(config: Config, kind: str) -> dict[str, Any]:
    """The options table of coding agent `kind`: `[coding_agents.<kind>]`, under `[coding_agent.options]`
    when `kind` is the configured one (those win); {} (its defaults) when neither names it."""
    options = dict(config.coding_agents.get(kind) or {})
    if kind == config.coding_agent.kind:
        options.update(config.coding_agent.options)
    return options


@dataclass(frozen=True)
class Followed:
    """Coding agent `kind`'s raw options and the variables merged over os.environ for its process."""

    options: dict[str, Any]
    env: dict[str, str]
    following: bool  # whether `[agent] provider` gave it any option or variable

    def environ(self) -> dict[str, str]:
        """The whole environment its process sees (what its `model_base_url` and `pricing` read)."""
        return {**os.environ, **self.env}


def followed(config: Config, cls: Any, kind: str, env: Mapping[str, str] | None = None) -> Followed:
    """Coding agent `kind` (class `cls`) with `[agent] provider` followed; `env`: the variables given
    for its process (Services' `coding_agent_env`: the Python API's, a test's), none from the CLI.

    Options: the user's own over the provider's defaults. Variables, lowest first:
    1. os.environ, the shell's. It is not put over what following derives, because `follow_provider`
       reads it itself and already yields to it where the user chose: a CLAUDE_CODE_USE_* set keeps
       Claude Code where it is, an OPENCODE_CONFIG_CONTENT is merged into (a raw copy on top would
       drop the provider `middle` the model names), the key comes from `[agent] api_key_env` (a
       shell's OPENAI_API_KEY on top would send the wrong key to the server); and `[agent]`'s
       region or profile, written for this project, beat an AWS_REGION exported for everything.
    2. what following derives (claude_code_cloud.py, aider's and OpenCode's `follow_provider`).
    3. `env`, given for this coding agent alone: the user's explicit word, it wins (docs/
       coding-agent.md, "the user's options and environment always win"; the Vertex end-to-end
       test gives Claude Code its ANTHROPIC_VERTEX_PROJECT_ID this way)."""
    options = coding_agent_options(config, kind)
    given = dict(env or {})
    follow = getattr(cls, "follow_provider", None)
    if follow is None:
        return Followed(options, given, False)
    defaults, derived = follow(options, config.agent, {**os.environ, **given})
    return Followed({**defaults, **options}, {**derived, **given}, bool(defaults or derived))
