"""Pytest fixtures for tests that run against the fake Messages API (and the real Claude Code CLI).

Use them from a conftest.py:

    from orchestrator.fake_api.pytest_fixtures import claude_cli, claude_env, fake_api  # noqa: F401

- `fake_api`: a started FakeMessagesAPI with an empty ScriptedResponder (script it with
  `fake_api.script.agent(...)` / `.coding_agent(...)`; read `fake_api.requests`); stopped afterwards.
- `claude_env`: env vars (a dict) pointing Claude Code at `fake_api` with a private
  CLAUDE_CONFIG_DIR and CLAUDE_CODE_MAX_RETRIES=0, so an API error ends a turn at once.
  Pass it as `ClaudeCodeAgent(options, env=claude_env)` or merge it over os.environ.
- `claude_cli`: the path of the Claude Code CLI; skips the test when it is not installed
  (fails instead when the CI environment variable is set).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from orchestrator.errors import CodingAgentError

from .env import claude_code_env
from .scripted import ScriptedResponder
from .server import FakeMessagesAPI


@pytest.fixture
def fake_api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(ScriptedResponder()) as fake:
        yield fake


@pytest.fixture
def claude_env(fake_api: FakeMessagesAPI, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return claude_code_env(fake_api.base_url, tmp_path_factory.mktemp("claude-config"), max_retries=0)


@pytest.fixture(scope="session")
def claude_cli() -> str:
    from orchestrator.claude_cli import find_claude_cli

    try:
        return find_claude_cli(None)
    except CodingAgentError as exc:
        missing = str(exc)
    if os.environ.get("CI"):  # CI installs the CLI (.ci/run): a missing one is a failure there
        pytest.fail(f"CI=true but the Claude Code CLI is missing: {missing}")
    pytest.skip(missing)
    raise AssertionError("unreachable: pytest.skip raises")  # (for type checkers that do not know it)
