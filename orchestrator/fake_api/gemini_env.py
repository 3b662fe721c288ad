"""The settings and environment that point the Gemini CLI at the fake Gemini API (fake_api.gemini)
with nothing of the machine's own configuration read, and no login, telemetry or update traffic."""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["FAKE_GEMINI_KEY", "OFFLINE_MODEL", "gemini_env", "offline_home"]

# A concrete model: with the CLI's default ("auto") every prompt first goes to a router model.
OFFLINE_MODEL = "gemini-2.5-pro"
FAKE_GEMINI_KEY = "fake-gemini-key"


def offline_home(home: Path) -> Path:
    """A Gemini CLI home (GEMINI_CLI_HOME) with settings for the fake: API-key auth (no browser or
    OAuth prompt), no folder-trust prompt, no auto-update, usage statistics or telemetry, and no
    retries (a scripted 5xx would otherwise be retried 10 times with backoff)."""
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 1},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "ide": {"enabled": False},
    }
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return home


def gemini_env(base_url: str, workdir: Path, api_key: str = FAKE_GEMINI_KEY) -> dict[str, str]:
    """Variables to merge over os.environ so a Gemini CLI child talks only to the fake at `base_url`.
    The machine-wide settings (/etc/gemini-cli) are pointed at paths under `workdir` that do not
    exist, so only the home's settings.json (offline_home) is read."""
    no_proxy = ",".join(filter(None, ["127.0.0.1", "localhost", os.environ.get("NO_PROXY", "")]))
    tmp = Path(workdir) / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return {
        # Its error reports (gemini-client-error-*.json, one per failed request) go here, not to /tmp.
        "TMPDIR": str(tmp),
        "GEMINI_API_KEY": api_key,
        "GOOGLE_GEMINI_BASE_URL": base_url,
        # Variables that would choose another auth (Vertex, a Google login) or another endpoint.
        "GOOGLE_GENAI_USE_VERTEXAI": "", "GOOGLE_GENAI_USE_GCA": "", "GOOGLE_API_KEY": "",
        "GOOGLE_CLOUD_PROJECT": "", "GEMINI_MODEL": "", "GEMINI_DEFAULT_AUTH_TYPE": "",
        "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(Path(workdir) / "no-system" / "settings.json"),
        "GEMINI_CLI_SYSTEM_DEFAULTS_PATH": str(Path(workdir) / "no-system" / "system-defaults.json"),
        "GEMINI_TELEMETRY_ENABLED": "false",
        "NO_PROXY": no_proxy, "no_proxy": no_proxy,
    }
