"""Fixtures for the Claude Code worker tests: a running fake Messages API and a Claude Code env for it."""

from orchestrator.fake_api.pytest_fixtures import claude_cli, claude_env, fake_api  # noqa: F401
