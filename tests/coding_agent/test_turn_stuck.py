"""TurnProcesses.run's stderr lines (`on_stderr`) and a turn its agent says cannot finish (`stuck`):
ended after process.STUCK_GRACE_S rather than at the turn's timeout (OpenCode and the Gemini CLI
retrying a model API that went away; their own tests run the real CLIs)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.coding_agent.process import TurnProcesses

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and prctl")


def run(script: str, tmp_path: Path, **kwargs: Any) -> tuple[Any, list[bytes], list[dict[str, Any]]]:
    stderr: list[bytes] = []
    events: list[dict[str, Any]] = []
    kwargs.setdefault("on_stderr", stderr.append)
    outcome = TurnProcesses("Test CLI").run(
        ["sh", "-c", script], cwd=tmp_path, env=dict(os.environ), stdin=None, timeout_s=120, mark="s-stuck",
        on_line=lambda line: None, emit=events.append, **kwargs)
    return outcome, stderr, events


def test_each_stderr_line_is_handed_over_whole_even_when_written_in_pieces(tmp_path):
    outcome, stderr, _ = run("printf 'Attempt 1 ' >&2; sleep 0.2; printf 'failed\\nsecond\\nno newline' >&2",
                             tmp_path)
    assert stderr == [b"Attempt 1 failed", b"second", b"no newline"]
    assert outcome.exit_code == 0 and outcome.stuck is None
    assert outcome.stderr == "Attempt 1 failed\nsecond\nno newline"  # (the tail is kept as before)


def test_a_turn_said_stuck_is_ended_after_the_grace_not_at_its_timeout(tmp_path):
    # (a timeout of 120 s: a stuck turn left running would time out instead, and fail here)
    seen: list[bytes] = []
    outcome, _, events = run(
        "echo 'Cannot connect to API' >&2; sleep 600", tmp_path,
        on_stderr=lambda line: seen.append(line) if b"Cannot connect" in line else None,
        stuck=lambda: "it cannot connect" if seen else None)
    assert outcome.stuck == "it cannot connect" and not outcome.timed_out
    assert outcome.exit_code is not None and outcome.exit_code < 0  # killed by us
    assert any(e.get("type") == "log" and "Test CLI cannot finish the turn (it cannot connect)" in e["line"]
               for e in events)


def test_a_reader_that_fails_on_a_line_does_not_stop_the_draining(tmp_path):
    def broken(line: bytes) -> None:
        raise RuntimeError("a bug in the reader")

    # 256 KiB of stderr on one line (handed over cut, 64 KiB at a time): a pipe nobody drained would
    # block the child, and the turn with it
    calls: list[int] = []
    outcome, _, _ = run("head -c 262144 /dev/zero | tr '\\0' x >&2; echo done", tmp_path,
                        on_stderr=lambda line: calls.append(len(line)) or broken(line))
    assert sum(calls) == 262144 and max(calls) <= 64 * 1024 + 4096
    assert outcome.exit_code == 0 and not outcome.timed_out
