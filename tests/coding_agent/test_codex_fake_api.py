"""The fake OpenAI Responses API (what Codex talks to), without the CLI: both translations and the wire."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from orchestrator.fake_api import DemoResponder, ScriptedResponder, api_error, reply, text, tool_use
from orchestrator.fake_api.openai_responses import (
    FakeResponsesAPI,
    canonical_to_items,
    parse_patch,
    responses_to_canonical,
)

CWD = "/work/proj"
TOOLS = [{"type": "function", "name": "exec_command", "parameters": {}},
         {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}]


def codex_request(*items: dict, tools=TOOLS) -> dict:
    """A request as Codex 0.171 sends it: developer prompt, environment context, then the turn."""
    return {"model": "gpt-5.5", "stream": True, "tools": tools, "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f"<environment_context>\n  <cwd>{CWD}</cwd>\n</environment_context>"}]},
        *items]}


def user(text_: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text_}]}


def test_a_request_becomes_the_canonical_body_with_its_working_directory():
    body = responses_to_canonical(codex_request(user("Create `a.txt` with:\n```\nA\n```\n")))
    assert body["system"].startswith("You are Codex.")
    assert f"Primary working directory: {CWD}" in body["system"]
    assert "<environment_context>" in body["system"]  # Codex's context, not the prompt
    prompt = "Create `a.txt` with:\n```\nA\n```\n"
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    assert [t["name"] for t in body["tools"]] == ["Bash", "Read", "Write", "Edit"]


def test_tool_calls_and_outputs_become_tool_use_and_tool_result_blocks():
    patch = f"*** Begin Patch\n*** Add File: {CWD}/a.txt\n+A\n*** End Patch\n"
    body = responses_to_canonical(codex_request(
        user("go"),
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": patch},
        {"type": "function_call", "call_id": "c2", "name": "exec_command", "arguments": '{"cmd": "false"}'},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "Success. Updated the following files:\nA a"},
        {"type": "function_call_output", "call_id": "c2", "output": "Process exited with code 1\nOutput:\n"},
    ))
    assistant, results = body["messages"][1], body["messages"][2]
    assert assistant["content"] == [
        {"type": "tool_use", "id": "c1", "name": "Write", "input": {"file_path": f"{CWD}/a.txt", "content": "A\n"}},
        {"type": "tool_use", "id": "c2", "name": "Bash", "input": {"command": "false"}}]
    assert [(r["tool_use_id"], r["is_error"]) for r in results["content"]] == [("c1", False), ("c2", True)]


def test_a_refused_patch_is_an_error_result():
    body = responses_to_canonical(codex_request(
        user("go"), {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch\n"},
        {"type": "custom_tool_call_output", "call_id": "c1",
         "output": "patch rejected: writing outside of the project; rejected by user approval settings"}))
    assert body["messages"][-1]["content"][0]["is_error"] is True


def test_canonical_tools_become_codex_tools():
    items = canonical_to_items(reply(
        text("Writing."),
        tool_use("Write", {"file_path": f"{CWD}/a.txt", "content": "one\ntwo\n"}, id="w1"),
        tool_use("Edit", {"file_path": f"{CWD}/a.txt", "old_string": "one", "new_string": "uno"}, id="e1"),
        tool_use("Bash", {"command": "ls -la"}, id="b1"),
    ), {"exec_command", "apply_patch"})
    assert items[0]["type"] == "message" and items[0]["content"][0]["text"] == "Writing."
    write, edit, bash = items[1:]
    assert write == {**write, "type": "custom_tool_call", "name": "apply_patch", "call_id": "w1",
                     "input": f"*** Begin Patch\n*** Add File: {CWD}/a.txt\n+one\n+two\n*** End Patch\n"}
    assert edit["input"] == f"*** Begin Patch\n*** Update File: {CWD}/a.txt\n@@\n-one\n+uno\n*** End Patch\n"
    assert (bash["type"], bash["name"], json.loads(bash["arguments"])) == ("function_call", "exec_command",
                                                                         {"cmd": "ls -la"})
    # ...and back: a patch reads as the Write / Edit it stands for.
    assert parse_patch(write["input"], CWD) == {"name": "Write", "input": {"file_path": f"{CWD}/a.txt",
                                                                           "content": "one\ntwo\n"}}
    assert parse_patch(edit["input"], CWD)["input"]["new_string"] == "uno"
    assert parse_patch("*** Begin Patch\n*** Add File: rel.txt\n+x\n*** End Patch\n", CWD)["input"]["file_path"] \
        == f"{CWD}/rel.txt"


def post(fake: FakeResponsesAPI, body: dict, key: str | None = "sk-test") -> tuple[int, str]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(fake.base_url + "/responses", data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sse(data: str) -> list[dict]:
    return [json.loads(line[6:]) for line in data.splitlines() if line.startswith("data: ")]


def test_the_reply_is_streamed_and_the_next_request_reads_as_scripted():
    script = ScriptedResponder().coding_agent(reply(tool_use("Read", {"file_path": f"{CWD}/a.txt"})), "Done.")
    with FakeResponsesAPI(script) as fake:
        status, data = post(fake, codex_request(user("read it")))
        events = sse(data)
        assert status == 200
        assert [e["type"] for e in events] == ["response.created", "response.output_item.added",
                                               "response.output_item.done", "response.completed"]
        call = events[2]["item"]
        assert call["name"] == "exec_command" and "cat --" in json.loads(call["arguments"])["cmd"]
        assert events[-1]["response"]["usage"]["total_tokens"] > 0
        # Codex sends the call back with its output: the responder sees its own Read again.
        post(fake, codex_request(user("read it"), call, {"type": "function_call_output", "call_id": call["call_id"],
                                                         "output": "Process exited with code 0\nOutput:\nA\n"}))
        second = fake.canonical_requests()[1]
        assert second["messages"][1]["content"][0]["name"] == "Read"
        assert [r.channel for r in fake.requests] == ["coding_agent", "coding_agent"]


def test_text_streams_as_deltas():
    with FakeResponsesAPI(ScriptedResponder().coding_agent("Hello.")) as fake:
        events = sse(post(fake, codex_request(user("hi")))[1])
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert deltas == ["Hello."] and done[0]["content"][0]["text"] == "Hello."


@pytest.mark.parametrize("status", [400, 429, 500])
def test_an_api_error_is_an_openai_error_with_its_status(status):
    with FakeResponsesAPI(ScriptedResponder().coding_agent(api_error(status, "scripted failure"))) as fake:
        got, data = post(fake, codex_request(user("hi")))
    assert got == status and json.loads(data)["error"]["message"] == "scripted failure"


def test_a_missing_or_rejected_key_is_401():
    with FakeResponsesAPI(ScriptedResponder()) as fake:
        fake.rejected_credentials.add("sk-bad")
        assert post(fake, codex_request(user("hi")), key=None)[0] == 401
        assert post(fake, codex_request(user("hi")), key="sk-bad")[0] == 401


def test_the_demo_model_writes_through_apply_patch_and_reads_the_result():
    prompt = "Create `notes/a.txt` with:\n```\nhello\n```\n"
    with FakeResponsesAPI(DemoResponder()) as fake:
        call = next(e["item"] for e in sse(post(fake, codex_request(user(prompt)))[1])
                    if e["type"] == "response.output_item.done" and e["item"]["type"] == "custom_tool_call")
        assert call["input"] == f"*** Begin Patch\n*** Add File: {CWD}/notes/a.txt\n+hello\n*** End Patch\n"
        answer = sse(post(fake, codex_request(user(prompt), call, {
            "type": "custom_tool_call_output", "call_id": call["call_id"],
            "output": "Success. Updated the following files:\nA notes/a.txt\n"}))[1])
    texts = [e["delta"] for e in answer if e["type"] == "response.output_text.delta"]
    assert texts == ["Created notes/a.txt."]
