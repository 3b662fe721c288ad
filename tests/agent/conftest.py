"""The fake Messages API fixture for middle-agent adapter tests."""

from orchestrator.fake_api.pytest_fixtures import fake_api  # noqa: F401
