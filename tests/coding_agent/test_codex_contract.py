"""Codex passes the coding-agent contract kit, on the fake Responses API with the real CLI."""

from __future__ import annotations

import pytest

from orchestrator.coding_agent.codex import INSTALL
from orchestrator.testing import CodingAgentContract, builtin_harness
from orchestrator.testing.clis import require_cli


class TestCodexContract(CodingAgentContract):
    @pytest.fixture
    def harness(self, tmp_path):
        require_cli("codex", INSTALL)
        with builtin_harness("codex", tmp_path) as harness:
            yield harness
