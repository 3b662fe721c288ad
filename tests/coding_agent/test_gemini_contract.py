"""The Gemini CLI passes the coding-agent contract kit, on the fake Gemini API with the real CLI."""

from __future__ import annotations

import pytest

from orchestrator.coding_agent.gemini import INSTALL_COMMAND
from orchestrator.testing import CodingAgentContract, builtin_harness
from orchestrator.testing.clis import require_cli

pytestmark = pytest.mark.slow  # the real Gemini CLI: seconds a turn


class TestGeminiContract(CodingAgentContract):
    # The CLI (a 100 MB node bundle) takes seconds to start on a loaded machine before its first
    # request; the turn must reach the model before it times out.
    turn_timeout_s = 10.0

    @pytest.fixture
    def harness(self, tmp_path):
        require_cli("gemini", INSTALL_COMMAND)
        with builtin_harness("gemini", tmp_path) as harness:
            yield harness
