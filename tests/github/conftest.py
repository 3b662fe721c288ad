"""Fixtures of the GitHub tests: a running fake GitHub API and a project configured to use it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.fake_api.pytest_fixtures import claude_cli  # noqa: F401  (a fixture)
from orchestrator.testing.fake_github import FakeGitHub


@pytest.fixture(autouse=True)
def _no_retry_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """GitHub reads are tried again after a 5xx at once here, not after 1 s and 2 s."""
    monkeypatch.setattr("tickets.github.client.RETRY_WAIT_S", 0.0)


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """The fake GitHub API, its token in GITHUB_TOKEN (the variable [github] token_env defaults to)."""
    with FakeGitHub() as fake:
        monkeypatch.setenv("GITHUB_TOKEN", fake.token)
        yield fake
