"""Gemini CLI's stream-json lines become our progress events and turn totals (lines as 0.61.0 prints them)."""

from __future__ import annotations

import uuid

import pytest

from orchestrator.coding_agent.gemini import GeminiAgent, GeminiOptions, cli_session_id
from orchestrator.coding_agent.gemini_stream import GeminiStream, api_status

TURN = """\
{"type":"init","timestamp":"2026-11-28T10:50:00.937Z","session_id":"c292f3b1","model":"gemini-2.5-pro"}
{"type":"message","timestamp":"2026-11-28T10:50:00.939Z","role":"user","content":"Do it"}
Ripgrep is not available. Falling back to GrepTool.
{"type":"message","timestamp":"2026-11-28T10:50:01.061Z","role":"assistant","content":"Writ","delta":true}
{"type":"message","timestamp":"2026-11-28T10:50:01.061Z","role":"assistant","content":"ing.","delta":true}
{"type":"tool_use","tool_name":"write_file","tool_id":"w1","parameters":{"file_path":"/p/in.txt","content":"in"}}
{"type":"tool_use","tool_name":"write_file","tool_id":"w2","parameters":{"file_path":"/out.txt","content":"out"}}
{"type":"tool_result","tool_id":"w1","status":"success"}
{"type":"tool_result","tool_id":"w2","status":"error","output":"Path not in workspace: /out.txt","error":\
{"type":"invalid_tool_params","message":"Path not in workspace: /out.txt"}}
{"type":"message","role":"assistant","content":"All ","delta":true}
{"type":"message","role":"assistant","content":"done.","delta":true}
{"type":"result","status":"success","stats":{"total_tokens":12372,"input_tokens":12296,"output_tokens":76,\
"cached":5,"input":12296,"duration_ms":544,"tool_calls":2,"models":{}}}
"""


def test_a_turn_becomes_events_text_tokens_and_denials():
    stream = GeminiStream(session_id="ours")
    events = [e for line in TURN.splitlines() for e in stream.feed(line)]
    assert [e["type"] for e in events] == ["init", "log", "text", "tool_use", "tool_use", "tool_result",
                                           "tool_result", "text", "result"]
    assert events[0]["session_id"] == "c292f3b1" and events[0]["model"] == "gemini-2.5-pro"
    assert events[2]["text"] == "Writing."
    assert events[3] == {"type": "tool_use", "name": "write_file", "id": "w1",
                         "input": {"file_path": "/p/in.txt", "content": "in"}}
    assert events[6]["is_error"] is True and "not in workspace" in events[6]["content"]
    assert stream.text == "All done."  # what it said after its last tool call
    assert stream.responses == 2
    assert stream.denials == [{"tool": "write_file", "target": "/out.txt"}]
    result = events[-1]
    assert result["is_error"] is False and result["usage"] == {
        "input_tokens": 12296, "output_tokens": 76, "cache_read_input_tokens": 5, "total_tokens": 12372}


def test_a_failed_result_names_the_api_status():
    stream = GeminiStream()
    stream.feed('{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: '
                '{\\"error\\":{\\"code\\":503,\\"message\\":\\"down\\",\\"status\\":\\"UNAVAILABLE\\"}}]"},'
                '"stats":{}}')
    assert stream.result_event()["is_error"] is True
    assert api_status(stream.error_message) == 503
    assert api_status("no status here") is None


def test_text_without_a_result_is_still_reported_at_the_end():
    stream = GeminiStream()
    assert stream.feed('{"type":"message","role":"assistant","content":"half","delta":true}') == []
    assert stream.finish() == [{"type": "text", "text": "half"}]


def test_the_command_resumes_by_our_session_id_and_reads_the_prompt_from_stdin(tmp_path):
    agent = GeminiAgent(GeminiOptions(model="gemini-2.5-pro", include_directories=["../lib"], extra_args=["--debug"]))
    first = agent.command("gemini", tmp_path, session_id="sid-1", resume=False)
    assert first[:5] == ["gemini", "--output-format", "stream-json", "--approval-mode", "auto_edit"]
    assert "--skip-trust" in first and first[first.index("--model") + 1] == "gemini-2.5-pro"
    assert first[first.index("--include-directories") + 1] == str((tmp_path / "../lib").resolve())
    assert first[first.index("--session-id") + 1] == "sid-1"
    assert first[-3:] == ["--debug", "-p", ""]
    again = agent.command("gemini", tmp_path, session_id="sid-1", resume=True)
    assert again[again.index("--resume") + 1] == "sid-1" and "--session-id" not in again


@pytest.mark.parametrize("ours", ["a b", "5", "latest", "x/../y", "é"])
def test_an_id_the_cli_would_refuse_or_misread_becomes_a_stable_uuid(ours, tmp_path):
    theirs = cli_session_id(ours)
    assert str(uuid.UUID(theirs)) == theirs and cli_session_id(ours) == theirs
    assert GeminiAgent().command("gemini", tmp_path, session_id=ours, resume=True)[-4:] == [
        "--resume", theirs, "-p", ""]
    assert cli_session_id("9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d") == "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d"


def test_yolo_is_refused_while_writes_are_confined():
    with pytest.raises(ValueError, match="yolo"):
        GeminiOptions(approval_mode="yolo")
    assert GeminiOptions(confine_writes=False, approval_mode="yolo").approval_mode == "yolo"
    with pytest.raises(ValueError):
        GeminiOptions(sandbox_mode="x")  # type: ignore[call-arg]  # unknown keys are an error
