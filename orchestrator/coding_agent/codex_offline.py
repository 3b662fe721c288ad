"""Codex pointed at the local fake OpenAI Responses API: `CodexAgent.offline`'s body."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .base import Offline

OFFLINE_MODEL = "gpt-5.5"  # a model 0.171 knows, so it offers apply_patch (an unknown one gets no patch tool)
OFFLINE_KEY_VAR = "CODEX_OFFLINE_API_KEY"  # not MIDDLE_*: those are middle's own settings


@contextmanager
def codex_offline(responder: Any, workdir: Path) -> Iterator[Offline]:
    """Start a fake Responses API answering from `responder`, with a private CODEX_HOME and HOME
    under `workdir`, and yield the options and environment that make Codex talk only to it (checked
    with strace: its one connection is to the fake)."""
    # Imported here: the fake is a test/demo double, never needed to run a real ticket.
    from orchestrator.fake_api.openai_responses import FakeResponsesAPI

    home, user_home = Path(workdir) / "codex-home", Path(workdir) / "codex-user-home"
    home.mkdir(parents=True, exist_ok=True)
    user_home.mkdir(parents=True, exist_ok=True)
    with FakeResponsesAPI(responder) as fake:
        options = {
            "model": OFFLINE_MODEL,
            # No retries: a scripted 5xx ends the turn at once instead of after Codex's backoff.
            "provider": {"base_url": fake.base_url, "env_key": OFFLINE_KEY_VAR,
                         "request_max_retries": 0, "stream_max_retries": 0},
            # Nothing but the fake: no plugin marketplace sync (a git ls-remote to GitHub), no apps.
            "extra_args": ["-c", "features.plugins=false", "-c", "features.apps=false",
                           "-c", "features.remote_plugin=false"],
        }
        no_proxy = ",".join(filter(None, ["127.0.0.1", "localhost", os.environ.get("NO_PROXY", "")]))
        # HOME too, as a precaution: nothing of the machine's home (its ~/.codex, user-level skills) is read.
        env = {"CODEX_HOME": str(home), "HOME": str(user_home), OFFLINE_KEY_VAR: "sk-fake-local",
               "OPENAI_API_KEY": "", "NO_PROXY": no_proxy, "no_proxy": no_proxy}
        yield Offline(options=options, env=env, requests=fake.canonical_requests)
