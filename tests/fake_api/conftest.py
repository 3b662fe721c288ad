"""Fixtures for the fake Messages API tests (shared with the worker and end-to-end tests)."""

from orchestrator.fake_api.pytest_fixtures import claude_cli, claude_env, fake_api  # noqa: F401
