"""The fake Messages API seen through the real `anthropic` SDK: JSON, SSE, parse, auth, errors, record."""

from __future__ import annotations

import http.client
import json
import socket
import struct
import threading
import urllib.error
import urllib.request

import anthropic
import pytest
from pydantic import BaseModel

from orchestrator.fake_api import (
    MIDDLE_AGENT_MARKER,
    FakeMessagesAPI,
    ScriptedResponder,
    api_error,
    local_server,
    reply,
    text,
    tool_use,
)

MODEL = "claude-test-model"
TOOLS = [{"name": "Write", "description": "write a file",
          "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}]


def client(fake: FakeMessagesAPI, **kw) -> anthropic.Anthropic:
    kw.setdefault("api_key", "sk-test")
    return anthropic.Anthropic(base_url=fake.base_url, max_retries=0, **kw)


def ask(c: anthropic.Anthropic, **kw):
    kw.setdefault("system", f"{MIDDLE_AGENT_MARKER}. Plan the ticket.")
    return c.messages.create(model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}], **kw)


def test_non_streaming_reply_with_text_and_tool_use(fake_api):
    fake_api.script.agent(reply(text("Let me write it."), tool_use("Write", {"file_path": "/tmp/x"})))
    msg = ask(client(fake_api))
    assert msg.model == MODEL
    assert msg.id.startswith("msg_")
    assert msg.stop_reason == "tool_use"
    assert [b.type for b in msg.content] == ["text", "tool_use"]
    assert msg.content[0].text == "Let me write it."
    assert msg.content[1].name == "Write" and msg.content[1].input == {"file_path": "/tmp/x"}
    assert msg.content[1].id.startswith("toolu_")
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0


def test_streaming_assembles_text_and_tool_input(fake_api):
    fake_api.script.coding_agent(
        reply(text("Writing."), tool_use("Write", {"file_path": "/a/b.py", "content": "x = 1\n"}))
    )
    with client(fake_api).messages.stream(
        model=MODEL, max_tokens=100, tools=TOOLS, messages=[{"role": "user", "content": "go"}]
    ) as stream:
        deltas = [e.delta.type for e in stream if e.type == "content_block_delta"]
        final = stream.get_final_message()
    assert "text_delta" in deltas and "input_json_delta" in deltas
    assert final.content[0].text == "Writing."
    assert final.content[1].input == {"file_path": "/a/b.py", "content": "x = 1\n"}
    assert final.stop_reason == "tool_use"
    assert final.usage.output_tokens > 1  # the full count arrives in message_delta


def test_plain_text_reply_ends_turn(fake_api):
    fake_api.script.agent("just text")
    msg = ask(client(fake_api))
    assert msg.stop_reason == "end_turn" and msg.content[0].text == "just text"


def test_parse_with_output_format_returns_the_scripted_json(fake_api):
    class Decision(BaseModel):
        complete: bool
        summary: str

    fake_api.script.agent(json.dumps({"complete": True, "summary": "All done."}))
    parsed = client(fake_api).messages.parse(
        model=MODEL,
        max_tokens=100,
        output_format=Decision,
        system=MIDDLE_AGENT_MARKER,
        messages=[{"role": "user", "content": "assess"}],
    )
    assert parsed.parsed_output == Decision(complete=True, summary="All done.")
    assert "output_config" in fake_api.requests[-1].body


def test_usage_override_is_sent(fake_api):
    fake_api.script.agent(reply(text("pricey"), usage={"input_tokens": 2_000_000, "output_tokens": 900_000}))
    msg = ask(client(fake_api))
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (2_000_000, 900_000)


def test_ids_are_unique(fake_api):
    fake_api.script.coding_agent(*[reply(tool_use("Read", {"file_path": "/x"})) for _ in range(3)])
    c = client(fake_api)
    msgs = [ask(c, system="coding agent", tools=TOOLS) for _ in range(3)]
    assert len({m.id for m in msgs}) == 3
    assert len({m.content[0].id for m in msgs}) == 3


def test_request_without_key_is_rejected_with_401():
    with FakeMessagesAPI() as fake:
        req = urllib.request.Request(
            fake.base_url + "/v1/messages", data=b"{}", method="POST", headers={"content-type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req)
    assert err.value.code == 401
    body = json.loads(err.value.read())
    assert body["type"] == "error" and body["error"]["type"] == "authentication_error"


def test_x_api_key_header_is_accepted(fake_api):
    fake_api.script.agent("ok")
    body = json.dumps(
        {
            "model": MODEL,
            "max_tokens": 5,
            "system": MIDDLE_AGENT_MARKER,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()
    req = urllib.request.Request(
        fake_api.base_url + "/v1/messages?beta=true",
        data=body,
        method="POST",
        headers={"content-type": "application/json", "x-api-key": "sk-raw"},
    )
    with urllib.request.urlopen(req) as resp:
        assert json.loads(resp.read())["content"] == [{"type": "text", "text": "ok"}]
    assert fake_api.requests[-1].headers["x-api-key"] == "sk-raw"


def test_bearer_token_is_accepted(fake_api):
    fake_api.script.agent("ok")
    c = anthropic.Anthropic(base_url=fake_api.base_url, auth_token="tok-test", max_retries=0)
    assert ask(c).content[0].text == "ok"
    assert fake_api.requests[-1].headers["authorization"] == "Bearer tok-test"


def test_scripted_http_errors_reach_the_client(fake_api):
    fake_api.script.agent(api_error(400, "bad field"), api_error(500, "boom"), api_error(529, "busy"))
    c = client(fake_api)
    with pytest.raises(anthropic.BadRequestError, match="bad field"):
        ask(c)
    with pytest.raises(anthropic.InternalServerError, match="boom"):
        ask(c)
    with pytest.raises(anthropic.APIStatusError) as err:
        ask(c)
    assert err.value.status_code == 529 and err.value.body["error"]["type"] == "overloaded_error"


def test_exhausted_agent_script_is_a_visible_500(fake_api):
    with pytest.raises(anthropic.InternalServerError, match="agent script is exhausted"):
        ask(client(fake_api))


def test_empty_worker_and_aux_queues_answer_text(fake_api):
    c = client(fake_api)
    assert ask(c, system="coding agent", tools=TOOLS).content[0].text == "Done."
    assert ask(c, system="write a title").content[0].text  # aux: some short text
    assert [r.channel for r in fake_api.requests] == ["coding_agent", "aux"]


def test_callable_reply_sees_the_request_body(fake_api):
    fake_api.script.agent(lambda body: f"you said {body['messages'][-1]['content']}")
    assert ask(client(fake_api)).content[0].text == "you said hi"


def test_responder_exception_becomes_a_500_naming_it(fake_api):
    fake_api.script.agent(lambda body: 1 / 0)
    with pytest.raises(anthropic.InternalServerError, match="ZeroDivisionError"):
        ask(client(fake_api))


def test_record_holds_every_request_with_channel_and_reply(fake_api):
    fake_api.script.agent("plan")
    c = client(fake_api)
    ask(c, system=[{"type": "text", "text": "preamble"}, {"type": "text", "text": MIDDLE_AGENT_MARKER}])
    c.messages.create(
        model=MODEL,
        max_tokens=10,
        messages=[{"role": "user", "content": "x"}],
        extra_query={"beta": "true"},
        tools=TOOLS,
    )
    agent, worker = fake_api.requests
    assert (agent.method, agent.path, agent.channel) == ("POST", "/v1/messages", "agent")
    assert "sk-test" in (agent.headers.get("x-api-key", "") + agent.headers.get("authorization", ""))
    assert agent.body["model"] == MODEL and agent.body["messages"][0]["content"] == "hi"
    assert agent.reply["status"] == 200 and agent.reply["content"] == ["plan"]
    assert worker.query == {"beta": "true"} and worker.channel == "coding_agent"
    assert fake_api.requests_for("agent") == [agent]


def test_count_tokens_and_unknown_paths(fake_api):
    c = client(fake_api)
    count = c.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "hello " * 100}])
    assert count.input_tokens > 50
    req = urllib.request.Request(fake_api.base_url + "/v1/nope", headers={"x-api-key": "k"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req)
    assert err.value.code == 404 and json.loads(err.value.read())["error"]["type"] == "not_found_error"
    assert [r.channel for r in fake_api.requests] == [None, None]  # not message generations


def test_script_property_refuses_other_responders():
    class Echo:
        def respond(self, channel, body):
            return reply(text(channel))

    fake = FakeMessagesAPI(Echo())
    with pytest.raises(TypeError):
        _ = fake.script
    assert isinstance(FakeMessagesAPI().script, ScriptedResponder)


def test_base_url_needs_a_running_server():
    fake = FakeMessagesAPI()
    with pytest.raises(RuntimeError):
        _ = fake.base_url
    with fake:
        assert fake.base_url.startswith("http://127.0.0.1:")


def test_a_json_reply_to_a_structured_output_request_becomes_that_tools_call(fake_api):
    structured = [{"name": "StructuredOutput", "description": "final answer",
                   "input_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}}}]
    fake_api.script.agent('{"prompt": "go"}', "not JSON at all", '{"prompt": "plain"}')
    c = client(fake_api)
    system = f"{MIDDLE_AGENT_MARKER} system"
    ask = {"model": MODEL, "max_tokens": 50, "system": system, "messages": [{"role": "user", "content": "x"}]}
    first = c.messages.create(**ask, tools=structured)
    assert [(b.type, getattr(b, "input", None)) for b in first.content] == [("tool_use", {"prompt": "go"})]
    assert first.stop_reason == "tool_use"
    second = c.messages.create(**ask, tools=structured)  # not JSON: sent as scripted
    assert [b.type for b in second.content] == ["text"]
    third = c.messages.create(**ask)  # no such tool offered: text as scripted
    assert third.content[0].type == "text" and third.content[0].text == '{"prompt": "plain"}'


def _spy_on_errors(monkeypatch) -> threading.Event:
    """Set once the server has dealt with a request's error (it does so on the request's thread)."""
    handled = threading.Event()
    original = local_server._Server.handle_error

    def spy(self, request, client_address):
        original(self, request, client_address)
        handled.set()

    monkeypatch.setattr(local_server._Server, "handle_error", spy)
    return handled


def test_a_client_hanging_up_mid_request_prints_nothing(fake_api, monkeypatch, capfd):
    """A coding agent killed at its turn's timeout resets its connection: no traceback on stderr
    (it read as the fake's failure in a user's terminal), and the server goes on serving."""
    handled = _spy_on_errors(monkeypatch)
    host, port = fake_api.base_url.split("//")[1].split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"par")
        # l_onoff=1, l_linger=0: close() sends a reset, not a polite FIN
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    assert handled.wait(10)
    assert "Traceback" not in capfd.readouterr().err
    fake_api.script.agent(reply(text("still here")))
    assert ask(client(fake_api)).content[0].text == "still here"


def test_a_fake_failing_by_itself_still_prints_its_traceback(monkeypatch, capfd):
    class Broken(local_server.FakeHandler):
        def _handle(self) -> None:
            raise RuntimeError("the fake's own bug")

    class BrokenServer(local_server.LocalServer):
        def _handler_class(self):
            return Broken

    handled = _spy_on_errors(monkeypatch)
    with BrokenServer() as server:
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            urllib.request.urlopen(f"http://127.0.0.1:{server._port}/", timeout=10)
        assert handled.wait(10)
    assert "RuntimeError: the fake's own bug" in capfd.readouterr().err
