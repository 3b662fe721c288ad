"""Process handling of the worker with a stand-in `claude` (tests/coding_agent/fake_claude_cli.py): stdin
prompt, non-JSON lines, a flood of stderr, crashes, leftover children, the session-in-use fallback."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.coding_agent.claude_code import ClaudeCodeAgent, ClaudeCodeOptions

FAKE = Path(__file__).parent / "fake_claude_cli.py"


def worker(cli: str, mode: str, **env) -> ClaudeCodeAgent:
    return ClaudeCodeAgent(ClaudeCodeOptions(cli_path=cli), env={"FAKE_CLAUDE_MODE": mode, **env})


def test_prompt_goes_to_stdin_and_noise_is_tolerated(fake_cli, tmp_path):
    events = []
    prompt = "--starts-like-a-flag\n" + "x" * 200_000  # too big for one argv string on Linux
    turn = worker(fake_cli, "noise").run_turn(prompt, tmp_path, session_id="sid-1", resume=False,
                                               on_event=events.append)
    assert turn.is_error is False and turn.exit_code == 0, turn.error
    echoed = json.loads(turn.text)
    assert echoed["prompt"] == prompt
    assert echoed["argv"][echoed["argv"].index("--session-id") + 1] == "sid-1"
    assert [e["type"] for e in events] == ["start", "log", "text", "result"]
    assert events[1]["line"] == "warming up (not JSON)"
    assert (turn.cost_usd, turn.num_turns, turn.duration_ms, turn.usage) == (0.5, 1, 7, {"input_tokens": 3})


def test_crash_without_result_is_an_error_with_stderr_tail(fake_cli, tmp_path):
    turn = worker(fake_cli, "crash").run_turn("hi", tmp_path, session_id=None, resume=False)
    assert turn.is_error is True and turn.exit_code == 3
    assert "exited with code 3" in turn.error and "something broke inside" in turn.error


def test_a_failing_progress_callback_does_not_break_the_turn(fake_cli, tmp_path):
    def explode(event):
        raise RuntimeError("display broke")

    turn = worker(fake_cli, "noise").run_turn("hi", tmp_path, session_id=None, resume=False, on_event=explode)
    assert turn.is_error is False


def test_children_left_behind_are_killed_with_the_turn(fake_cli, tmp_path):
    pidfile = tmp_path / "child.pid"
    turn = worker(fake_cli, "orphan", FAKE_CLAUDE_PIDFILE=str(pidfile)).run_turn(
        "hi", tmp_path, session_id=None, resume=False)
    assert turn.is_error is False
    child = int(pidfile.read_text())
    assert not _alive(child)


def test_session_already_in_use_is_resumed(fake_cli, tmp_path):
    events = []
    turn = worker(fake_cli, "in_use").run_turn("hi", tmp_path, session_id="sid-9", resume=False,
                                                on_event=events.append)
    assert turn.is_error is False and turn.text == "resumed --resume sid-9"
    assert [e["resume"] for e in events if e["type"] == "start"] == [False, True]


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
