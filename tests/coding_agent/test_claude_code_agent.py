"""ClaudeCodeAgent driving the REAL Claude Code CLI against the fake Messages API."""

from __future__ import annotations

import time
import uuid

import pytest

from orchestrator.coding_agent.claude_code import ClaudeCodeAgent, ClaudeCodeOptions
from orchestrator.fake_api import api_error, reply, text, tool_use, working_directory
from orchestrator.testing.turn_processes import group_running

pytestmark = pytest.mark.cli


@pytest.fixture
def make_worker(claude_cli, claude_env):
    def make(**options) -> ClaudeCodeAgent:
        options.setdefault("cli_path", claude_cli)
        return ClaudeCodeAgent(ClaudeCodeOptions(**options), env=claude_env)

    return make


def write_reply(relative: str, content: str):
    return lambda body: reply(text(f"Writing {relative}."),
                              tool_use("Write", {"file_path": f"{working_directory(body)}/{relative}",
                                                 "content": content}))


def all_text(body) -> str:
    """Every string in a request's messages, so a test can look for earlier turns in it."""
    out = []
    for m in body["messages"]:
        blocks = m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}]
        out += [str(b.get("text") or b.get("content") or b.get("id") or "") for b in blocks]
    return "\n".join(out)


def test_turn_writes_a_file_then_resume_continues_the_session(fake_api, make_worker, tmp_path):
    fake_api.script.coding_agent(write_reply("app.py", "print('hi')\n"), "Wrote app.py.", "Second turn done.")
    worker, sid, events = make_worker(), str(uuid.uuid4()), []

    first = worker.run_turn("Create app.py", tmp_path, session_id=sid, resume=False, on_event=events.append)
    assert first.is_error is False, first.error
    assert (tmp_path / "app.py").read_text() == "print('hi')\n"
    assert (first.session_id, first.text, first.exit_code) == (sid, "Wrote app.py.", 0)
    assert first.cost_usd > 0 and first.num_turns == 2 and first.usage["input_tokens"] > 0
    kinds = [e["type"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "result"
    assert {"init", "text", "tool_use", "tool_result"} <= set(kinds)
    assert next(e for e in events if e["type"] == "tool_use")["name"] == "Write"
    tool_id = fake_api.requests_for("coding_agent")[0].reply["content"][1]["id"]
    seen = len(fake_api.requests)

    events.clear()
    second = worker.run_turn("Now add a test", tmp_path, session_id=sid, resume=True, on_event=events.append)
    assert second.is_error is False, second.error
    assert (second.session_id, second.text) == (sid, "Second turn done.")
    later = fake_api.requests[seen:]
    assert len(later) == 1
    history = all_text(later[0].body)
    # The fake received the whole earlier conversation, then the new prompt.
    assert "Create app.py" in history and tool_id in history and "Wrote app.py." in history
    assert history.rstrip().endswith("Now add a test")
    # cost_usd is per turn; Claude Code's own total_cost_usd is the session's running total.
    result = events[-1]
    assert result["session_cost_usd"] == pytest.approx(first.cost_usd + second.cost_usd)


def test_api_error_is_an_error_although_subtype_says_success(fake_api, make_worker, tmp_path):
    fake_api.script.coding_agent(api_error(500, "upstream exploded"))
    events = []
    turn = make_worker().run_turn("hi", tmp_path, session_id=str(uuid.uuid4()), resume=False,
                                  on_event=events.append)
    assert events[-1]["subtype"] == "success" and events[-1]["is_error"] is True
    assert turn.is_error is True and turn.exit_code == 1 and turn.terminal_reason == "api_error"
    assert "HTTP 500" in turn.error and "upstream exploded" in turn.error
    assert len(fake_api.requests_for("coding_agent")) == 1  # CLAUDE_CODE_MAX_RETRIES=0: no retry storm


def test_bad_flag_exits_1_with_stderr_in_the_error(make_worker, tmp_path):
    turn = make_worker(extra_args=["--no-such-flag"]).run_turn("hi", tmp_path, session_id=None, resume=False)
    assert turn.is_error is True and turn.exit_code == 1
    assert "--no-such-flag" in turn.error and "extra_args" in turn.error


def test_resuming_an_unknown_session_fails_cleanly(fake_api, make_worker, tmp_path):
    sid = str(uuid.uuid4())
    turn = make_worker().run_turn("hi", tmp_path, session_id=sid, resume=True)
    assert turn.is_error is True and turn.exit_code == 1
    assert sid in turn.error and "no session" in turn.error
    assert fake_api.requests == []


def test_restarting_a_turn_whose_session_exists_resumes_it(fake_api, make_worker, tmp_path):
    worker, sid = make_worker(), str(uuid.uuid4())
    assert worker.run_turn("first try", tmp_path, session_id=sid, resume=False).is_error is False
    # Same (run, turn) re-run after a crash: the caller still says resume=False.
    again = worker.run_turn("first try", tmp_path, session_id=sid, resume=False)
    assert again.is_error is False and again.session_id == sid


def test_timeout_kills_the_process_group(fake_api, make_worker, tmp_path):
    def slow(body):
        time.sleep(8)
        return "too late"

    fake_api.script.coding_agent(slow)
    events = []
    turn = make_worker(turn_timeout_s=2).run_turn("hi", tmp_path, session_id=str(uuid.uuid4()), resume=False,
                                                  on_event=events.append)
    assert turn.is_error is True and turn.terminal_reason == "timeout"
    assert "within 2 s" in turn.error
    assert "timeout" in [e["type"] for e in events]
    pid = next(e["pid"] for e in events if e["type"] == "start")
    assert group_running(pid) == set()  # at once: the turn returns when nothing of it runs


def test_max_turns_is_reported(fake_api, make_worker, tmp_path):
    fake_api.script.coding_agent(write_reply("a.txt", "a\n"), write_reply("b.txt", "b\n"))
    turn = make_worker(max_turns=1).run_turn("go", tmp_path, session_id=None, resume=False)
    assert turn.is_error is True and turn.terminal_reason == "max_turns"
    assert "max_turns" in turn.error


def test_no_file_watching_probe_folder_is_left_after_a_turn_and_resume_still_works(
        fake_api, claude_cli, claude_env, tmp_path):
    """Claude Code probes file watching in `<its temp root>/claude-<uid>/fswatch-probe-*` and a
    headless turn ends before the probe removes it: before, every turn left one. The root
    itself stays (it holds the session's task outputs, which a resumed turn may read)."""
    from orchestrator.coding_agent.claude_probes import probe_root

    temp = tmp_path / "t"  # (short: Claude Code puts sockets under it)
    temp.mkdir()
    env = {**claude_env, "CLAUDE_CODE_TMPDIR": str(temp)}
    worker = ClaudeCodeAgent(ClaudeCodeOptions(cli_path=claude_cli), env=env)
    project = tmp_path / "p"
    project.mkdir()
    fake_api.script.coding_agent("First.", "Second.")
    sid = str(uuid.uuid4())
    root = probe_root(env)
    for turn in (1, 2):
        done = worker.run_turn(f"Turn {turn}", project, session_id=sid, resume=turn == 2)
        assert done.is_error is False and done.text == ("First." if turn == 1 else "Second."), done.error
        assert root.is_dir() and not list(root.glob("fswatch-probe-*")), sorted(p.name for p in root.iterdir())
