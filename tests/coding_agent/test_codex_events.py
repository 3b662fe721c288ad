"""Codex 0.171's `exec --json` lines (as recorded from the real CLI) as our progress events."""

from __future__ import annotations

import json

from orchestrator.coding_agent.codex_events import CodexStream

CHANGES = [{"path": "/p/b.txt", "kind": "add"}, {"path": "/p/c", "kind": "update"}]
RECORDED = [
    {"type": "thread.started", "thread_id": "01a221c1-4317-70f3-af4f-77debb926c4c"},
    {"type": "turn.started"},
    {"type": "item.started", "item": {"id": "item_0", "type": "command_execution", "command": "/bin/bash -lc ls",
                                      "aggregated_output": "", "exit_code": None, "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_0", "type": "command_execution", "command": "/bin/bash -lc ls",
                                        "aggregated_output": "a.txt\n", "exit_code": 2, "status": "completed"}},
    {"type": "item.started", "item": {"id": "item_1", "type": "file_change", "status": "in_progress",
                                      "changes": CHANGES}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "file_change", "status": "completed",
                                        "changes": CHANGES}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "Done."}},
    {"type": "turn.completed", "usage": {"input_tokens": 200, "cached_input_tokens": 0, "output_tokens": 10}},
]


def feed(stream: CodexStream, lines: list) -> list[dict]:
    out: list[dict] = []
    for line in lines:
        out += stream.feed((json.dumps(line) if isinstance(line, dict) else line).encode() + b"\n")
    return out


def test_a_turn_becomes_claude_code_shaped_events_and_totals():
    stream = CodexStream(session_id="ours")
    events = feed(stream, RECORDED)
    assert events[0] == {"type": "init", "session_id": "ours", "thread_id": "01a221c1-4317-70f3-af4f-77debb926c4c"}
    assert [(e["type"], e.get("name")) for e in events[1:]] == [
        ("tool_use", "Bash"), ("tool_result", None), ("tool_use", "Write"), ("tool_use", "Edit"),
        ("tool_result", None), ("text", None)]
    assert events[2]["is_error"] is True  # exit code 2
    assert events[3]["input"] == {"file_path": "/p/b.txt"}
    assert stream.completed and stream.usage["input_tokens"] == 200 and stream.last_text == "Done."
    assert stream.thread_id == "01a221c1-4317-70f3-af4f-77debb926c4c" and stream.failure is None


def test_a_failed_turn_and_stray_lines():
    stream = CodexStream()
    events = feed(stream, ["Reading additional input from stdin...", "",
                           {"type": "error", "message": "Reconnecting... 1/5"},
                           {"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized"}}])
    assert [e["type"] for e in events] == ["log", "log", "log"]
    assert stream.failure == "unexpected status 401 Unauthorized" and not stream.completed
    assert stream.non_json == ["Reading additional input from stdin..."]
    assert stream.failure_status is None  # (its status is in the words: codex._status reads it)


def test_a_raw_error_body_is_a_400():
    """Codex 0.171 passes a 400 on as the response body alone (its InvalidRequest), every other
    status as "unexpected status N ...": the OpenAI error body's shape is what says 400."""
    body = {"error": {"message": "Invalid 'input[2]': empty.", "type": "invalid_request_error",
                      "code": None, "param": "input"}}
    stream = CodexStream()
    feed(stream, [{"type": "error", "message": json.dumps(body)},
                  {"type": "turn.failed", "error": {"message": json.dumps(body)}}])
    assert stream.failure == "Invalid 'input[2]': empty." and stream.failure_status == 400
    other = CodexStream()
    feed(other, [{"type": "turn.failed", "error": {"message": "stream disconnected before completion"}}])
    assert other.failure_status is None


def test_a_notice_of_a_retry_does_not_end_the_turn_and_waiting_for_the_network_does():
    """Codex says each retry it makes as an `error` ("Reconnecting... 1/5 (429 ...)") and may then
    complete: the turn is not over (the process runner ends an agent 5 s after its answer), so a
    retry that works is not cut off. "waiting for network" (it waits for ever), a 401, turn.failed:
    over."""
    stream = CodexStream()
    feed(stream, [{"type": "error", "message": "Reconnecting... 1/5 (unexpected status 429 Too Many Requests)"}])
    assert not stream.answered
    feed(stream, RECORDED[1:])
    assert stream.answered and stream.completed
    for last in ({"type": "error", "message": "Reconnecting... waiting for network (Connection failed: refused)"},
                 {"type": "error", "message": "unexpected status 401 Unauthorized"},
                 {"type": "turn.failed", "error": {"message": "exceeded retry limit, last status: 429"}}):
        other = CodexStream()
        feed(other, [{"type": "error", "message": "Reconnecting... 2/5"}, last])
        assert other.answered and not other.completed, last
