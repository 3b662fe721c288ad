"""The fake Messages API fixture for middle-agent adapter tests (and the Claude Code CLI for the
claude-code provider)."""

from orchestrator.fake_api.pytest_fixtures import claude_cli, fake_api  # noqa: F401
