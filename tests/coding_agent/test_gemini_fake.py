"""The fake Gemini API translates both ways without the CLI: Gemini requests into canonical
(Anthropic-shaped) bodies for the responders, canonical replies into Gemini responses and SSE."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from orchestrator.fake_api import DemoResponder, ScriptedResponder, api_error, reply, text, tool_use
from orchestrator.fake_api.gemini import FakeGeminiAPI, as_gemini_response, as_messages_body, sse_chunks
from orchestrator.fake_api.messages import classify, working_directory

CONTEXT = ("<session_context>\nThis is the Gemini CLI.\n- **Workspace Directories:**\n  - /work/project\n"
           "- **Directory Structure:**\n</session_context>")
TOOLS = [{"functionDeclarations": [
    {"name": "write_file", "description": "Writes a file.", "parametersJsonSchema": {
        "type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["file_path", "content"]}},
    {"name": "replace", "description": "Replaces text.", "parametersJsonSchema": {"type": "object"}},
]}]


def gemini_body() -> dict[str, Any]:
    """A second request of a turn, as Gemini CLI 0.61.0 sends it: the prompt, the model's call,
    the CLI's functionResponse."""
    return {
        "systemInstruction": {"role": "user", "parts": [{"text": "You are Gemini CLI."}]},
        "contents": [
            {"role": "user", "parts": [{"text": CONTEXT}, {"text": "Create hello.txt"}]},
            {"role": "model", "parts": [{"text": "thinking...", "thought": True}, {"text": "Writing."},
                                        {"functionCall": {"id": "toolu_1", "name": "write_file",
                                                          "args": {"file_path": "/work/project/hello.txt",
                                                                   "content": "hi\n"}}},
                                        {"functionCall": {"id": "toolu_2", "name": "replace",
                                                          "args": {"file_path": "/work/project/a.py",
                                                                   "instruction": "x", "old_string": "a",
                                                                   "new_string": "b"}}}]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "toolu_1", "name": "write_file",
                                      "response": {"output": "Successfully created hello.txt"}}},
                {"functionResponse": {"id": "toolu_2", "name": "replace",
                                      "response": {"error": "Path not in workspace"}}}]},
        ],
        "tools": TOOLS,
        "generationConfig": {"temperature": 1},
    }


def test_a_gemini_request_becomes_a_canonical_body():
    body = as_messages_body(gemini_body())
    assert classify(body) == "coding_agent"
    assert working_directory(body) == "/work/project"
    assert body["system"].startswith("You are Gemini CLI.")
    user, model, results = body["messages"]
    assert [b["text"] for b in user["content"]][-1] == "Create hello.txt"
    assert model["role"] == "assistant"
    assert model["content"][0] == {"type": "text", "text": "Writing."}  # the thought is left out
    assert model["content"][1] == {"type": "tool_use", "id": "toolu_1", "name": "Write",
                                   "input": {"file_path": "/work/project/hello.txt", "content": "hi\n"}}
    assert model["content"][2]["name"] == "Edit"
    assert model["content"][2]["input"] == {"file_path": "/work/project/a.py", "old_string": "a", "new_string": "b"}
    assert results["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Successfully created hello.txt",
         "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Path not in workspace", "is_error": True}]
    assert [t["name"] for t in body["tools"]] == ["Write", "Edit"]


def test_responses_without_ids_pair_with_the_calls_in_order():
    raw = gemini_body()
    for part in raw["contents"][1]["parts"] + raw["contents"][2]["parts"]:
        for key in ("functionCall", "functionResponse"):
            if key in part:
                del part[key]["id"]
    model, results = as_messages_body(raw)["messages"][1:]
    uses = [b["id"] for b in model["content"] if b["type"] == "tool_use"]
    assert [b["tool_use_id"] for b in results["content"]] == uses and len(set(uses)) == 2


def test_a_canonical_reply_becomes_gemini_parts_with_the_clis_tool_names():
    result = reply(text("Doing it."), tool_use("Write", {"file_path": "/p/a.txt", "content": "A"}, id="t1"),
                   tool_use("Edit", {"file_path": "/p/b.py", "old_string": "x", "new_string": "y"}, id="t2"),
                   tool_use("Bash", {"command": "ls"}, id="t3"), tool_use("Read", {"file_path": "/p/c"}, id="t4"),
                   usage={"input_tokens": 11, "output_tokens": 7})
    response = as_gemini_response(result, {"contents": []}, "gemini-2.5-pro")
    parts = response["candidates"][0]["content"]["parts"]
    assert parts[0] == {"text": "Doing it."}
    assert parts[1]["functionCall"] == {"id": "t1", "name": "write_file",
                                        "args": {"file_path": "/p/a.txt", "content": "A"}}
    edit = parts[2]["functionCall"]
    assert edit["name"] == "replace" and edit["args"]["old_string"] == "x" and edit["args"]["new_string"] == "y"
    assert edit["args"]["instruction"]  # required by the CLI's replace tool
    assert parts[3]["functionCall"]["name"] == "run_shell_command"
    assert parts[3]["functionCall"]["args"]["command"] == "ls"
    assert parts[4]["functionCall"] == {"id": "t4", "name": "read_file", "args": {"file_path": "/p/c"}}
    assert response["usageMetadata"] == {"promptTokenCount": 11, "candidatesTokenCount": 7, "totalTokenCount": 18}
    chunks = sse_chunks(response)
    assert [list(p) for c in chunks for p in c["candidates"][0]["content"]["parts"]] == \
        [["text"]] + [["functionCall"]] * 4
    assert "finishReason" in chunks[-1]["candidates"][0] and "usageMetadata" in chunks[-1]


def post(url: str, body: Any, key: str | None = "k") -> tuple[int, str]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              **({"x-goog-api-key": key} if key else {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_fake_serves_streaming_and_records_the_canonical_body():
    script = ScriptedResponder()
    script.coding_agent(lambda body: reply(text("ok"), tool_use(
        "Write", {"file_path": f"{working_directory(body)}/x.txt", "content": "X"})))
    with FakeGeminiAPI(script) as fake:
        status, raw = post(f"{fake.base_url}/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
                           gemini_body())
        assert status == 200
        chunks = [json.loads(line[len("data: "):]) for line in raw.split("\r\n\r\n") if line.startswith("data: ")]
        call = chunks[-1]["candidates"][0]["content"]["parts"][0]["functionCall"]
        assert call["name"] == "write_file" and call["args"] == {"file_path": "/work/project/x.txt", "content": "X"}
        status, raw = post(f"{fake.base_url}/v1beta/models/gemini-2.5-pro:countTokens", gemini_body())
        assert status == 200 and json.loads(raw)["totalTokens"] > 0
        [canonical] = fake.canonical("coding_agent")
        assert canonical["model"] == "gemini-2.5-pro" and canonical["messages"][1]["content"][1]["name"] == "Write"
        assert fake.requests[0].reply["status"] == 200


def test_an_api_error_and_a_missing_or_refused_key_have_googles_error_shape():
    script = ScriptedResponder().coding_agent(api_error(500, "The fake model is down."))
    with FakeGeminiAPI(script) as fake:
        url = f"{fake.base_url}/v1beta/models/m:generateContent"
        status, raw = post(url, gemini_body())
        assert status == 500
        assert json.loads(raw) == {"error": {"code": 500, "message": "The fake model is down.", "status": "INTERNAL"}}
        assert post(url, gemini_body(), key=None)[0] == 403
        fake.rejected_credentials.add("bad-key")
        status, raw = post(url, gemini_body(), key="bad-key")
        assert status == 400 and "API key not valid" in raw
        assert post(f"{fake.base_url}/v1/nothing", {})[0] == 404


@pytest.mark.parametrize("reply_text, expected", [
    ("Fake reply.", {"next_speaker": "user", "reasoning": ""}),  # not JSON: the schema's smallest value
    ('{"next_speaker": "model", "reasoning": "more"}', {"next_speaker": "model", "reasoning": "more"}),
])
def test_a_side_call_asking_for_json_gets_json(reply_text, expected):
    schema = {"type": "OBJECT", "properties": {"reasoning": {"type": "STRING"},
                                               "next_speaker": {"type": "STRING", "enum": ["user", "model"]}},
              "required": ["reasoning", "next_speaker"]}
    body = {"contents": [{"role": "user", "parts": [{"text": "Who speaks next?"}]}],
            "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema}}
    with FakeGeminiAPI(ScriptedResponder().aux(reply_text)) as fake:
        status, raw = post(f"{fake.base_url}/v1beta/models/gemini-2.5-flash:generateContent", body)
        assert status == 200
        answer = json.loads(json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"])
        assert answer == expected
        assert fake.requests[0].channel == "aux"


def test_the_demo_responder_writes_through_the_translation_and_sees_the_result():
    prompt = "Create `notes.txt` with:\n```\nhello\n```\n"
    first = {"contents": [{"role": "user", "parts": [{"text": CONTEXT}, {"text": prompt}]}], "tools": TOOLS}
    with FakeGeminiAPI(DemoResponder()) as fake:
        url = f"{fake.base_url}/v1beta/models/m:generateContent"
        parts = json.loads(post(url, first)[1])["candidates"][0]["content"]["parts"]
        call = next(p["functionCall"] for p in parts if "functionCall" in p)
        assert call["name"] == "write_file" and call["args"] == {"file_path": "/work/project/notes.txt",
                                                                 "content": "hello\n"}
        second = dict(first, contents=first["contents"] + [
            {"role": "model", "parts": parts},
            {"role": "user", "parts": [{"functionResponse": {"id": call["id"], "name": "write_file",
                                                             "response": {"output": "ok"}}}]}])
        parts = json.loads(post(url, second)[1])["candidates"][0]["content"]["parts"]
        assert parts == [{"text": "Created notes.txt."}]
