"""The stream-json parser on lines captured from Claude Code 2.1.330 (tests/coding_agent/data/*.ndjson)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.coding_agent.stream_json import TurnStream, parse_line, turn_cost

DATA = Path(__file__).parent / "data"


def feed(name: str) -> tuple[TurnStream, list[dict]]:
    stream = TurnStream()
    events = [e for line in (DATA / f"{name}.ndjson").read_text().splitlines() for e in stream.feed(line)]
    return stream, events


def test_parse_line_tolerates_noise():
    assert parse_line('{"type": "result"}') == {"type": "result"}
    assert parse_line(b'  {"a": 1}\n') == {"a": 1}
    for junk in ("", "   ", "npm WARN something", "{not json", "[1, 2]", '"text"'):
        assert parse_line(junk) is None


def test_successful_turn_with_a_tool_call():
    stream, events = feed("success_write")
    assert [e["type"] for e in events] == ["init", "text", "tool_use", "tool_result", "text", "result"]
    tool = events[2]
    assert tool["name"] == "Write" and tool["input"]["file_path"].endswith("/hello.py")
    assert events[3]["is_error"] is False and events[3]["tool_use_id"] == tool["id"]
    result = events[-1]
    assert result["is_error"] is False and result["text"] == "Created hello.py."
    assert result["cost_usd"] > 0 and result["session_id"] == stream.session_id
    assert stream.result["num_turns"] == 2 and stream.last_text == "Created hello.py."


def test_api_error_reports_subtype_success_but_is_error():
    stream, events = feed("api_error_400")
    assert stream.result["subtype"] == "success"  # why failure is judged by is_error, never subtype
    assert events[-1]["is_error"] is True
    assert stream.result["api_error_status"] == 400 and stream.result["terminal_reason"] == "api_error"


def test_unknown_session_has_only_a_result_line_with_errors():
    stream, events = feed("unknown_session")
    assert [e["type"] for e in events] == ["result"]
    assert "No conversation found" in stream.result["errors"][0]


def test_max_turns():
    stream, _ = feed("max_turns")
    assert stream.result["terminal_reason"] == "max_turns" and stream.result["is_error"] is True


def test_retry_lines_become_retry_events():
    _, events = feed("retry_then_success")
    retry = next(e for e in events if e["type"] == "retry")
    assert retry["attempt"] == 1 and retry["error_status"] == 500
    assert events[-1]["is_error"] is False


def test_resumed_turn_costs_only_its_own_share():
    stream, events = feed("resumed")
    r = stream.result
    assert r["total_cost_usd"] > turn_cost(r) > 0  # total_cost_usd is the session's running total
    assert events[-1]["session_cost_usd"] == pytest.approx(r["total_cost_usd"])
    assert turn_cost({"total_cost_usd": 0.25}) == 0.25  # CLIs without the per-result breakdown


def test_non_json_lines_become_log_events():
    stream = TurnStream()
    assert stream.feed("Warning: something\n") == [{"type": "log", "line": "Warning: something"}]
    assert stream.feed("\n") == []
    assert stream.non_json == ["Warning: something"] and stream.result is None
