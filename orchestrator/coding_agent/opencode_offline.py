"""OpenCode pointed at the local fake Chat Completions API: `OpenCodeAgent.offline`'s body.

Nothing of the machine is read or written: HOME and the XDG config/data/cache/state dirs are under
`workdir`. Nothing is fetched (OpenCode 1.18.33 would otherwise reach the network at run time):
- the provider is `@ai-sdk/openai-compatible`, which OpenCode bundles (no npm install of it);
- OPENCODE_DISABLE_MODELS_FETCH: no models.dev catalogue download; OPENCODE_MODELS_PATH names an
  empty catalogue written here, so OpenCode does not parse the one it bundles (every provider's
  models, of which the fake needs none: its provider and prices are in the config): about a third
  of the CPU a turn's start-up takes (12 -> 8.5 CPU-seconds a turn, measured on 1.18.33);
- each config dir gets a background `npm install @opencode-ai/plugin` (for local plugins) unless it
  already has node_modules and a package.json / package-lock.json naming that package: those are
  written here, empty of code (no plugin is used), so the install is found done and skipped;
- no auto-update, no share, no LSP download, no Claude Code files (~/.claude) read;
- no plugins (OPENCODE_PURE, OPENCODE_DISABLE_DEFAULT_PLUGINS), no skills from the machine, no
  file watcher: nothing there is needed offline, and OpenCode starts about a second sooner.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .base import Offline

PROVIDER, MODEL = "middle-fake", "fake-model"
UNPRICED_MODEL = "fake-model-unpriced"  # the same fake with no price in OpenCode's config
_PLUGIN = "@opencode-ai/plugin"


def offline_home(home: Path, base_url: str, api_key: str) -> dict[str, str]:
    """Make OpenCode's dirs under `home` with a config whose only provider is the fake at
    `base_url`; return the environment that points OpenCode there and keeps it off the network."""
    config = home / "config" / "opencode"
    (config / "node_modules").mkdir(parents=True, exist_ok=True)
    for name in ("data", "cache", "state"):
        (home / name).mkdir(parents=True, exist_ok=True)
    models = home / "models.json"  # the empty catalogue (see the module docstring)
    models.write_text("{}")
    # Found "installed" by OpenCode's dependency check (see the module docstring).
    (config / "package.json").write_text(json.dumps({"dependencies": {_PLUGIN: "*"}}))
    (config / "package-lock.json").write_text(json.dumps({"packages": {"": {"dependencies": {_PLUGIN: "*"}}}}))
    (config / "opencode.json").write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json",
        "model": f"{PROVIDER}/{MODEL}", "small_model": f"{PROVIDER}/{MODEL}",
        "autoupdate": False, "share": "disabled",
        "snapshot": False,  # its undo history (a git copy of the project): not needed offline
        "provider": {PROVIDER: {"npm": "@ai-sdk/openai-compatible", "name": "middle fake model",
                                "options": {"baseURL": base_url, "apiKey": api_key},
                                # A price (USD per million tokens, as models.dev gives them) so
                                # that a turn's cost is really computed and reported offline.
                                "models": {MODEL: {"name": "middle offline model",
                                                   "cost": {"input": 3, "output": 15}},
                                           # none: as a local or custom model, its cost is $0
                                           UNPRICED_MODEL: {"name": "middle offline model, unpriced"}}}},
    }, indent=2))
    no_proxy = ",".join(filter(None, ["127.0.0.1", "localhost", os.environ.get("NO_PROXY", "")]))
    return {
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state"),
        "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_MODELS_PATH": str(models),
        "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        "OPENCODE_PURE": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE_SKILLS": "1", "OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER": "1",
        # Any other install (a project's own .opencode/ dir gets the same one) fails at once without
        # a request ("cache mode is 'only-if-cached'"), which OpenCode only logs.
        "npm_config_offline": "true",
        "NO_PROXY": no_proxy, "no_proxy": no_proxy,
    }


@contextmanager
def opencode_offline(responder: Any, workdir: Path) -> Iterator[Offline]:
    """Start the fake Chat Completions API answering from `responder`, with OpenCode's home and
    config under `workdir`; stop it on exit."""
    # Imported here: the fake is a test/demo double, never needed to run a real ticket.
    from orchestrator.config.offline import FAKE_API_KEY
    from orchestrator.fake_api.openai_chat import FakeChatCompletionsAPI

    with FakeChatCompletionsAPI(responder) as api:
        env = offline_home(Path(workdir) / "opencode-home", api.base_url, FAKE_API_KEY)
        yield Offline(options={"model": f"{PROVIDER}/{MODEL}"}, env=env,
                      requests=lambda: [r.canonical for r in api.requests_for("coding_agent")])
