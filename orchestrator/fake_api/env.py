"""Environment variables that point Claude Code at a (fake) Messages API with no login or other traffic."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from orchestrator.errors import ConfigError

log = logging.getLogger("middle.offline")


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


def offline_config_dir(config_dir: str | Path) -> Path:
    """Claude Code's config dir for offline mode (`CLAUDE_CONFIG_DIR`), made if missing. Its
    `.claude.json` is ours, not the user's (their own config is never used offline): one that is
    no JSON object (a write cut short, an edit) is removed, and Claude Code writes a fresh one,
    where it would otherwise fail every turn with a parse error and a restore command."""
    folder = Path(config_dir)
    folder.mkdir(parents=True, exist_ok=True)
    settings = folder / ".claude.json"
    try:
        ok = isinstance(json.loads(settings.read_text(encoding="utf-8")), dict)
    except FileNotFoundError:
        return folder
    except (OSError, ValueError):  # (UnicodeDecodeError is a ValueError)
        ok = False
    if not ok:
        log.warning("removed %s: it was not valid JSON (Claude Code's settings for offline mode, middle's "
                    "own); Claude Code writes a new one", settings)
        try:
            settings.unlink(missing_ok=True)
        except OSError as exc:  # (a folder of that name, no permission)
            raise ConfigError(f"{settings} is not valid JSON and cannot be removed ({exc}): remove it; "
                              "it holds Claude Code's settings for offline mode, which middle makes again") from None
    return folder
