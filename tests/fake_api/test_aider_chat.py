"""The aider side of the fake Chat Completions API, without aider: its requests as canonical coding-agent
requests, canonical replies as aider's whole-file listings, side calls on "aux", errors as HTTP errors.

data/aider_request.json is a request aider 0.86.2 sent (turn 2 of a session, a chat file holding
``` so aider chose the ```` fence), recorded by the fake."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

from orchestrator.coding_agent import aider
from orchestrator.fake_api import DemoResponder, ScriptedResponder, api_error, reply, text, tool_use
from orchestrator.fake_api.aider_chat import (
    PROJECT_DIR_HEADER,
    AiderChatAdapter,
    FakeAiderAPI,
    canonical_body,
    fence_of,
    listing,
)
from orchestrator.fake_api.messages import content_text, last_user_text, working_directory

RECORDED = json.loads((Path(__file__).parent / "data" / "aider_request.json").read_text())


def aider_request(prompt: str, fence: str = "```") -> dict:
    """A first-turn request as aider 0.86.2 builds it (the recorded one, cut to its first turn)."""
    body = json.loads(json.dumps(RECORDED).replace("````", fence))
    system = body["messages"][0]["content"]
    reminder = system[system.index("To suggest changes to a file"):]
    body["messages"] = body["messages"][:7] + [{"role": "user", "content": f"{prompt}\n\n{reminder}"}]
    return body


def post(fake: FakeAiderAPI, body: dict, cwd: str | None = None, key: str = "sk-fake") -> tuple[int, dict]:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    if cwd:
        headers[PROJECT_DIR_HEADER] = quote(cwd)
    req = urllib.request.Request(f"{fake.base_url}/chat/completions", data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_recorded_request_reads_as_the_canonical_request_with_the_earlier_turn(tmp_path):
    body = canonical_body(RECORDED, str(tmp_path))
    assert working_directory(body) == str(tmp_path)
    assert [t["name"] for t in body["tools"]] == ["Write", "Edit"]  # so it is the coding_agent channel
    said = [content_text(m["content"]) for m in body["messages"]]
    # aider's few-shot example is gone; the earlier turn and the chat file are there
    assert not any("Change the greeting" in s for s in said)
    assert any("Remember the word PAPAYA-7." in s for s in said) and any("Noted: PAPAYA-7." in s for s in said)
    assert any("Some ```fenced``` notes" in s for s in said)
    # the prompt without the format reminder aider appends to it
    assert last_user_text(body) == "Which word? See notes.md"
    assert fence_of(body["system"]) == ("````", "````")


def test_write_and_edit_become_whole_file_listings_relative_to_the_project(tmp_path):
    (tmp_path / "app.py").write_text("x = 1\ny = 2\n")
    script = ScriptedResponder().coding_agent(
        reply(text("Changing two files."),
              tool_use("Write", {"file_path": str(tmp_path / "pkg" / "new.txt"), "content": "no newline"}),
              tool_use("Edit", {"file_path": str(tmp_path / "app.py"), "old_string": "y = 2", "new_string": "y = 3"}),
              tool_use("Write", {"file_path": str(tmp_path.parent / "outside.txt"), "content": "out\n"}),
              tool_use("Bash", {"command": "make"})),
        "Done with both.")
    adapter = AiderChatAdapter(script)
    answer = adapter.answer(aider_request("Change them."), str(tmp_path))
    assert answer.content[0]["text"] == (
        "Changing two files.\n\n"
        + listing("pkg/new.txt", "no newline", ("```", "```")) + "\n\n"
        + "app.py\n```\nx = 1\ny = 3\n```\n\n"
        + "../outside.txt\n```\nout\n```\n\n"  # as a model writing through aider names it
        + "Done with both.\n")
    # The second canonical request is "the turn after the tools ran": each tool_use has its result.
    first, after = adapter.canonical_requests
    uses = [b for b in after["messages"][-2]["content"] if b["type"] == "tool_use"]
    results = after["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in uses]
    assert [bool(r.get("is_error")) for r in results] == [False, False, False, True]  # no Bash in aider
    assert last_user_text(first) == "Change them."


def test_a_chosen_fence_and_a_failed_edit(tmp_path):
    (tmp_path / "a.md").write_text("text\n")
    script = ScriptedResponder().coding_agent(
        reply(tool_use("Edit", {"file_path": str(tmp_path / "a.md"), "old_string": "absent", "new_string": "x"}),
              tool_use("Write", {"file_path": str(tmp_path / "b.md"), "content": "```\ncode\n```\n"})),
        lambda body: f"results: {content_text(body['messages'][-1]['content'])}")
    answer = AiderChatAdapter(script).answer(aider_request("Go.", fence="````"), str(tmp_path))
    said = answer.content[0]["text"]
    assert "b.md\n````\n```\ncode\n```\n````" in said
    assert "a.md\n````" not in said and "old_string not found" in said


def test_the_demo_model_creates_its_files_through_aider_listings(tmp_path):
    prompt = "Create `hello.py` with:\n```python\nprint('hi')\n```"
    answer = AiderChatAdapter(DemoResponder()).answer(aider_request(prompt), str(tmp_path))
    said = answer.content[0]["text"]
    assert "hello.py\n```\nprint('hi')\n```" in said and "Created hello.py." in said


def test_the_fake_serves_aider_and_records_both_shapes(tmp_path):
    tmp_path = tmp_path / "dossier été"  # a header is latin-1: the agent percent-encodes the path
    script = ScriptedResponder().coding_agent("Hello from the script.").aux("A summary.")
    with FakeAiderAPI(script) as fake:
        status, answer = post(fake, aider_request("Say hello."), cwd=str(tmp_path))
        assert status == 200
        assert answer["choices"][0]["message"]["content"] == "Hello from the script.\n"
        assert answer["usage"]["prompt_tokens"] > 0  # aider's token and cost report reads these
        # aider's side call (a chat summary) has another system prompt: the aux channel
        side = {"model": "m", "messages": [{"role": "system", "content": "*Briefly* summarize this conversation"},
                                           {"role": "user", "content": "..."}]}
        assert post(fake, side)[1]["choices"][0]["message"]["content"] == "A summary."
        assert [r.channel for r in fake.requests] == ["coding_agent", "aux"]
        (canonical,) = fake.canonical_requests()
        assert working_directory(canonical) == str(tmp_path)


@pytest.mark.parametrize("status", [401, 500])
def test_a_scripted_error_is_an_openai_error(status):
    with FakeAiderAPI(ScriptedResponder().coding_agent(api_error(status, "scripted failure"))) as fake:
        code, answer = post(fake, aider_request("Fail."))
    assert code == status and answer["error"]["message"] == "scripted failure"


def test_a_rejected_key_is_a_401():
    with FakeAiderAPI(ScriptedResponder()) as fake:
        fake.rejected_credentials.add("sk-revoked")
        code, answer = post(fake, aider_request("Hi."), key="sk-revoked")
    assert code == 401 and fake.script.pending("coding_agent") == 0


def test_the_fake_reads_the_header_the_agent_sends():
    assert PROJECT_DIR_HEADER == aider.PROJECT_DIR_HEADER
