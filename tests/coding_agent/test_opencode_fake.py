"""The fake Chat Completions API for coding agents, without a CLI: canonical tool calls go out in the
request's own tool names (OpenCode's), its tool results come back to the responder as tool_result
blocks, streamed or not; and OpenCode's `--format json` lines parsed into our events."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from orchestrator.coding_agent.opencode import OpenCodeAgent, OpenCodeOptions
from orchestrator.coding_agent.opencode_events import OpenCodeStream
from orchestrator.errors import ConfigError
from orchestrator.fake_api import DemoResponder, ScriptedResponder, api_error, reply, text, tool_use
from orchestrator.fake_api.chat_tools import as_messages_body
from orchestrator.fake_api.openai_chat import FakeChatCompletionsAPI

DATA = Path(__file__).parent / "data" / "opencode_run.jsonl"


def fn(name: str, *params: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": f"the {name} tool", "parameters": {
        "type": "object", "properties": {p: {"type": "string"} for p in params}, "required": list(params)}}}


# OpenCode 1.18.33's own tools (the parameter names of a recorded request)
TOOLS = [fn("bash", "command", "timeout", "workdir"), fn("edit", "filePath", "oldString", "newString", "replaceAll"),
         fn("read", "filePath", "offset", "limit"), fn("write", "content", "filePath"), fn("glob", "pattern")]
SYSTEM = "You are opencode.\n<env>\n  Working directory: /srv/project\n</env>"


def post(fake: FakeChatCompletionsAPI, body: dict[str, Any]) -> tuple[int, bytes]:
    req = urllib.request.Request(f"{fake.base_url}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer sk"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def chat(*messages: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"model": "fake-model", "messages": [{"role": "system", "content": SYSTEM}, *messages], "tools": TOOLS,
            **more}


SCRIPTED = reply(text("On it."), tool_use("Write", {"file_path": "/srv/project/a.txt", "content": "A\n"}),
                 tool_use("Edit", {"file_path": "/srv/project/b.py", "old_string": "x", "new_string": "y"}),
                 tool_use("Bash", {"command": "ls"}), tool_use("Read", {"file_path": "/srv/project/c"}))
EXPECTED = [("write", {"filePath": "/srv/project/a.txt", "content": "A\n"}),
            ("edit", {"filePath": "/srv/project/b.py", "oldString": "x", "newString": "y"}),
            ("bash", {"command": "ls"}), ("read", {"filePath": "/srv/project/c"})]


def test_canonical_tool_calls_go_out_as_the_requests_own_tools():
    script = ScriptedResponder().coding_agent(SCRIPTED)
    with FakeChatCompletionsAPI(script) as fake:
        status, raw = post(fake, chat({"role": "user", "content": "make a.txt"}))
        [record] = fake.requests
    assert status == 200
    choice = json.loads(raw)["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "On it."
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in choice["message"]["tool_calls"]]
    assert calls == EXPECTED
    assert record.channel == "coding_agent"
    assert [t["name"] for t in record.canonical["tools"]] == ["bash", "edit", "read", "write", "glob"]
    assert record.canonical["system"] == SYSTEM and record.canonical["messages"] == [
        {"role": "user", "content": "make a.txt"}]


def sse(raw: bytes) -> list[Any]:
    lines = [ln[len("data: "):] for ln in raw.decode().split("\n\n") if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(ln) for ln in lines[:-1]]


def test_a_streamed_reply_assembles_to_the_same_calls_and_ends_with_usage():
    script = ScriptedResponder().coding_agent(SCRIPTED, "Done.")
    with FakeChatCompletionsAPI(script) as fake:
        _, raw = post(fake, chat({"role": "user", "content": "go"}, stream=True,
                                 stream_options={"include_usage": True}))
        _, plain = post(fake, chat({"role": "user", "content": "go"}, stream=True))
    chunks = sse(raw)
    text_out = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    calls: dict[int, dict[str, str]] = {}
    for c in chunks:
        for d in (c["choices"][0]["delta"].get("tool_calls") or []) if c["choices"] else []:
            call = calls.setdefault(d["index"], {"name": "", "arguments": ""})
            call["name"] += d.get("function", {}).get("name") or ""
            call["arguments"] += d.get("function", {}).get("arguments") or ""
    assert text_out == "On it."
    assert [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())] == EXPECTED
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0
    assert all(c["choices"] for c in sse(plain))  # no usage chunk unless asked for
    assert sse(plain)[-1]["choices"][0]["finish_reason"] == "stop"


def test_tool_results_reach_the_responder_as_tool_result_blocks_paired_with_the_call():
    """The demo model, seeing its Write's result, says it created the file: the turn after the tool ran."""
    history = chat(
        {"role": "user", "content": "Create `a.txt` with:\n```\nA\n```\n"},
        {"role": "assistant", "content": "Creating a.txt.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "write", "arguments": json.dumps({"filePath": "/srv/project/a.txt",
                                                                     "content": "A\n"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Wrote file successfully."})
    body = as_messages_body(history)
    assert body["messages"][1]["content"][1] == {"type": "tool_use", "id": "call_1", "name": "Write",
                                                 "input": {"file_path": "/srv/project/a.txt", "content": "A\n"}}
    assert body["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "Wrote file successfully."}]}
    with FakeChatCompletionsAPI(DemoResponder()) as fake:
        _, raw = post(fake, history)
    assert json.loads(raw)["choices"][0]["message"]["content"] == "Created a.txt."


@pytest.mark.parametrize("content", ["File not found: /srv/project/x.txt", "oldString not found in content",
                                     "Error: EACCES: permission denied", "The user has specified a rule which "
                                     "prevents you from using this specific tool call."])
def test_a_failed_tool_calls_result_is_flagged_as_the_messages_api_flags_it(content):
    """Chat Completions has no error flag on a `role: tool` message: OpenCode's failure texts are
    what mark the tool_result is_error, so a script can react to a failed call."""
    history = chat(
        {"role": "user", "content": "Read x.txt."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read", "arguments": json.dumps({"filePath": "/srv/project/x.txt"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": content})
    assert as_messages_body(history)["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": content, "is_error": True}]
    ok = chat(*history["messages"][1:3], {"role": "tool", "tool_call_id": "call_1", "content": "A file saying Error."})
    assert "is_error" not in as_messages_body(ok)["messages"][2]["content"][0]


def test_a_tool_the_request_does_not_offer_is_sent_as_scripted_and_errors_keep_their_status():
    script = ScriptedResponder().coding_agent(reply(tool_use("Glob", {"pattern": "*.py"}),
                                                    tool_use("NotebookEdit", {"cell": 1})),
                                              api_error(429, "slow down"))
    with FakeChatCompletionsAPI(script) as fake:
        _, raw = post(fake, chat({"role": "user", "content": "find"}))
        status, err = post(fake, chat({"role": "user", "content": "again"}))
    calls = json.loads(raw)["choices"][0]["message"]["tool_calls"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("glob", {"pattern": "*.py"}), ("NotebookEdit", {"cell": 1})]
    assert status == 429 and json.loads(err)["error"]["message"] == "slow down"


def test_opencode_lines_become_our_events_and_totals():
    stream = OpenCodeStream()
    events = [e for line in DATA.read_text().splitlines() for e in stream.feed(line)]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "init" and events[0]["session_id"].startswith("ses_")
    write = next(e for e in events if e["type"] == "tool_use")
    assert write["name"] == "write" and write["input"]["file_path"] == "/srv/project/hello.txt"
    results = [e for e in events if e["type"] == "tool_result"]
    assert [r["is_error"] for r in results] == [False, True]
    assert stream.permission_denials == [{"tool": "write", "target": "/srv/outside.txt"}]
    assert stream.steps == 3 and stream.tokens["input_tokens"] > 0 and stream.tokens["output_tokens"] > 0
    assert stream.text == "All done."  # the last message's text, not the earlier ones'
    assert stream.api_error_status == 401 and stream.error_message() == "bad key"
    assert stream.feed(b"not json\n") == [{"type": "log", "line": "not json"}]


def test_the_options_keep_the_agent_in_the_project():
    config = OpenCodeAgent(OpenCodeOptions(bash_allow=["pytest *"])).config()
    assert config["permission"] == {"edit": "allow", "bash": {"*": "deny", "pytest *": "allow"},
                                    "external_directory": "deny"}
    assert config["autoupdate"] is False and config["share"] == "disabled"
    assert list(config["permission"]["bash"])[0] == "*"  # OpenCode takes the last matching rule
    for bad in ({"bash_allow": ["*"]}, {"permission": {"external_directory": "allow"}},
                {"permission": {"webfetch": "sometimes"}}, {"turn_timeout": 3}):
        with pytest.raises(ValueError):
            OpenCodeOptions(**bad)
    free = OpenCodeAgent(OpenCodeOptions(scope_to_project=False, permission={"bash": "allow"})).config()
    assert free["permission"] == {"edit": "allow", "bash": "allow"}


def test_opencode_is_a_built_in_coding_agent_whose_options_are_checked_at_load():
    from orchestrator.plugins.manager import PluginRegistry

    registry = PluginRegistry(load_entry_points=False)
    assert registry.coding_agent_class("opencode") is OpenCodeAgent
    assert registry.coding_agent_options("opencode", {"model": "p/m"}).model == "p/m"
    with pytest.raises(ConfigError, match="lets any shell command write outside the project"):
        registry.coding_agent_options("opencode", {"bash_allow": ["*"]})
