"""A model call through a CLI (orchestrator/agent/claude_code_llm.call_cli, the `claude-code` and
`codex` providers) that does not answer in time: an AgentReplyError naming the CLI, and nothing of
it left running, the child a launcher started (Codex's native binary) included."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from orchestrator.agent.claude_code_llm import call_cli
from orchestrator.errors import AgentReplyError
from orchestrator.testing.turn_processes import alive, wait_until
from tickets.procs import is_running, start_ticks

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")


def test_a_cli_call_past_its_timeout_is_an_error_and_leaves_nothing_running(tmp_path):
    pid_file = tmp_path / "worker.pid"
    # A launcher (as Codex's Node script is) whose child does the work, and never answers.
    launcher = f"sleep 300 & echo $! > {pid_file}; wait"
    with pytest.raises(AgentReplyError, match="the test CLI did not answer within 1 s"):
        call_cli(["sh", "-c", launcher], "prompt", str(tmp_path), dict(os.environ), 1.0, "the test CLI")
    worker = int(pid_file.read_text())
    try:
        assert wait_until(lambda: not is_running(worker), 30), "the launcher's child outlived the call"
    finally:
        for pid, _ in alive({(worker, start_ticks(worker))}):
            os.kill(pid, signal.SIGKILL)


def test_a_cli_call_that_answers_gives_its_output_and_exit_code(tmp_path):
    out, err, code = call_cli(["sh", "-c", "cat; echo oops >&2; exit 3"], "the prompt", str(tmp_path),
                              dict(os.environ), 30.0, "the test CLI")
    assert (out, err.strip(), code) == ("the prompt", "oops", 3)
