"""Environment variables that point Claude Code at a (fake) Messages API with no login or other traffic."""

from __future__ import annotations

import os
from pathlib import Path


def claude_code_env(base_url: str, config_dir: str | Path, api_key: str = "sk-fake-local", *,
                    max_retries: int | None = None) -> dict[str, str]:
    """Variables to merge over os.environ for a Claude Code child process.

    `config_dir` becomes CLAUDE_CONFIG_DIR so the user's own settings, sessions and login are
    neither read nor touched. `max_retries` sets CLAUDE_CODE_MAX_RETRIES: Claude Code otherwise
    retries a 5xx/429 ten times with backoff (minutes), so tests of API errors pass 0.
    """
    no_proxy = ",".join(filter(None, ["127.0.0.1", "localhost", os.environ.get("NO_PROXY", "")]))
    env = {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": api_key,
        # An inherited OAuth/bearer token would take precedence over the key; blank it.
        "ANTHROPIC_AUTH_TOKEN": "",
        "CLAUDE_CONFIG_DIR": str(config_dir),
        # One switch for auto-updates, telemetry, error reporting and feedback prompts...
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # ...and the individual switches too, in case a version stops honouring the umbrella one.
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        # A proxy from the user's environment must not intercept calls to the local fake.
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
    }
    if max_retries is not None:
        env["CLAUDE_CODE_MAX_RETRIES"] = str(max_retries)
    return env
