"""OpenCode passes the coding-agent contract kit, on the fake Chat Completions API with the real CLI."""

from __future__ import annotations

import pytest

from orchestrator.coding_agent.opencode import INSTALL
from orchestrator.testing import CodingAgentContract, builtin_harness
from orchestrator.testing.clis import require_cli


class TestOpenCodeContract(CodingAgentContract):
    # OpenCode takes seconds to start (several on a loaded machine) before it asks its model: the
    # held answer must still be asked for before the timeout ends the turn.
    turn_timeout_s = 20.0

    @pytest.fixture
    def harness(self, tmp_path):
        require_cli("opencode", INSTALL)
        with builtin_harness("opencode", tmp_path) as harness:
            yield harness
