"""A scripted fake of the OpenAI Chat Completions API (what Ollama, vLLM, LM Studio and OpenRouter
also serve), for the middle agent's `openai-compatible` provider; it records every request.

`POST /v1/chat/completions` (also without `/v1`) is answered from the same responders as the fake
Messages API (a ScriptedResponder's "agent" queue, or the DemoResponder): the chat's system
message becomes `system`, the rest `messages`, and the reply's text the assistant message. Text
only and not streamed: this is the middle agent's model, which calls no tools.

`supports_json_schema = False` makes it answer 400 to `response_format: json_schema`, as a server
without structured output does; `rejected_credentials` makes it answer 401 to those keys.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .local_server import RequestRecord
from .messages import classify
from .replies import ApiError, Reply, estimate_tokens, new_id
from .server import RecordingFake, Responder

ROUTES = ("/v1/chat/completions", "/chat/completions")


@dataclass
class ChatRequest(RequestRecord):
    """One request as the fake saw it; `channel` as the Messages fake's ("agent" for the middle agent)."""

    channel: str | None = None
    reply: dict[str, Any] = field(default_factory=dict)


class FakeChatCompletionsAPI(RecordingFake[ChatRequest]):
    """Serves POST /v1/chat/completions on 127.0.0.1 (an ephemeral port); `base_url` ends in /v1."""

    _name = "fake-chat-completions-api"

    def __init__(self, responder: Responder | None = None, *, supports_json_schema: bool = True,
                 max_completion_tokens_only: bool = False, host: str = "127.0.0.1", port: int = 0):
        super().__init__(responder, host, port)
        self.supports_json_schema = supports_json_schema
        # As OpenAI's reasoning models: `max_tokens` refused with a 400 naming max_completion_tokens.
        self.max_completion_tokens_only = max_completion_tokens_only

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(_Handler):
            pass

        Handler.fake = fake
        return Handler

    def __enter__(self) -> "FakeChatCompletionsAPI":
        return self.start()  # type: ignore[no-any-return]

    @property
    def base_url(self) -> str:
        """The address to configure as `[agent] base_url` (OpenAI clients append /chat/completions)."""
        return f"http://{self._address[0]}:{self._port}/v1"



def as_messages_body(chat: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions body as a Messages API body, for the responders (system apart)."""
    system = "\n".join(str(m.get("content") or "") for m in chat.get("messages") or [] if m.get("role") == "system")
    messages = [{"role": m.get("role"), "content": m.get("content") or ""}
                for m in chat.get("messages") or [] if m.get("role") in ("user", "assistant")]
    return {"model": chat.get("model"), "system": system, "messages": messages,
            "max_tokens": chat.get("max_tokens")}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeChatCompletionsAPI
    timeout = 120

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        route = parts.path.rstrip("/")
        ok = self.command == "POST" and route in ROUTES and isinstance(body, dict)
        record = ChatRequest(method=self.command, path=parts.path, query=dict(parse_qsl(parts.query)),
                             headers={k.lower(): v for k, v in self.headers.items()}, body=body,
                             channel=classify(as_messages_body(body)) if ok else None)
        self.fake._record(record)
        try:
            self._route(ok, record)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _route(self, ok: bool, record: ChatRequest) -> None:
        auth = self.headers.get("Authorization", "")
        if any(c and c in auth for c in self.fake.rejected_credentials):
            return self._error(record, 401, "Incorrect API key provided.", "invalid_api_key")
        if not ok:
            return self._error(record, 404, f"Not found: {self.command} {record.path} (the fake serves "
                                            "POST /v1/chat/completions)", "not_found")
        body = record.body
        if self.fake.max_completion_tokens_only and "max_tokens" in body:
            return self._error(record, 400, "Unsupported parameter: 'max_tokens' is not supported with this "
                                            "model. Use 'max_completion_tokens' instead.", "unsupported_parameter")
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema" and not self.fake.supports_json_schema:
            return self._error(record, 400, "response_format of type json_schema is not supported by this "
                                            "server", "invalid_request_error")
        try:
            result = self.fake.responder.respond(record.channel or "aux", as_messages_body(body))
        except Exception as exc:  # a broken script must fail visibly, not hang the client
            return self._error(record, 500, f"The fake responder raised {type(exc).__name__}: {exc}", "server_error")
        if isinstance(result, ApiError):
            return self._error(record, result.status, result.message, result.type)
        self._send_completion(record, result)

    def _send_completion(self, record: ChatRequest, result: Reply) -> None:
        text = "".join(b.get("text", "") for b in result.content if b.get("type") == "text")
        prompt_tokens = estimate_tokens(record.body.get("messages"))
        completion_tokens = estimate_tokens(text)
        record.reply = {"status": 200, "content": text[:200]}
        self._send_json(200, {
            "id": new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
            "model": str(record.body.get("model") or "fake"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        })

    def _error(self, record: ChatRequest, status: int, message: str, code: str) -> None:
        record.reply = {"status": status, "error": message}
        self._send_json(status, {"error": {"message": message, "type": code, "code": code, "param": None}})

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
