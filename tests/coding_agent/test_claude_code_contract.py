"""Claude Code passes the coding-agent contract kit, on the fake Messages API with the real CLI."""

from __future__ import annotations

import pytest

from orchestrator.testing import CodingAgentContract, builtin_harness


class TestClaudeCodeContract(CodingAgentContract):
    @pytest.fixture
    def harness(self, tmp_path, claude_cli):
        with builtin_harness("claude-code", tmp_path) as harness:
            yield harness
