"""Claude Code pointed at the local fake Messages API: `ClaudeCodeAgent.offline`'s body."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .base import Offline


@contextmanager
def claude_code_offline(responder: Any, workdir: Path) -> Iterator[Offline]:
    """Start the fake Messages API answering from `responder`, with Claude Code's config dir
    (sessions, settings, login) under `workdir`; stop it on exit."""
    # Imported here: the fake is a test/demo double, never needed to run a real ticket.
    from orchestrator.config.offline import FAKE_API_KEY
    from orchestrator.fake_api.env import claude_code_env, offline_config_dir
    from orchestrator.fake_api.server import FakeMessagesAPI

    config_dir = offline_config_dir(Path(workdir) / "claude-config")
    with FakeMessagesAPI(responder) as api:
        # No retries: Claude Code would otherwise retry a scripted 5xx ten times with backoff (minutes).
        env = claude_code_env(api.base_url, config_dir, api_key=FAKE_API_KEY, max_retries=0)
        yield Offline(options={}, env=env,
                      requests=lambda: [r.body for r in api.requests_for("coding_agent")])
