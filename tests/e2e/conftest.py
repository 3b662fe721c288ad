"""End-to-end fixtures: the real Claude Code CLI against the project's fake Messages API."""

from orchestrator.fake_api.pytest_fixtures import claude_cli, claude_env, fake_api  # noqa: F401
