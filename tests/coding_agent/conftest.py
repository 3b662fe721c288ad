"""Fixtures for the Claude Code coding-agent tests: a running fake Messages API and a Claude Code env for
it, and a stand-in `claude` (fake_claude_cli.py) on a path of its own."""

import stat
import sys
from pathlib import Path

import pytest

from orchestrator.fake_api.pytest_fixtures import claude_cli, claude_env, fake_api  # noqa: F401

FAKE = Path(__file__).parent / "fake_claude_cli.py"


@pytest.fixture
def fake_cli(tmp_path) -> str:
    wrapper = tmp_path / "bin" / "claude"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)
