"""A scripted fake of the OpenAI Chat Completions API (what Ollama, vLLM, LM Studio and OpenRouter
also serve), for the middle agent's `openai-compatible` provider; it records every request.

`POST /v1/chat/completions` (also without `/v1`) is answered from the same responders as the fake
Messages API (a ScriptedResponder's queues, or the DemoResponder): the chat's system message
becomes `system`, the rest `messages`, and the reply's text the assistant message. A request with
`tools` is a coding agent's (OpenCode's) main loop, the "coding_agent" channel: canonical tool
calls in the reply go out as `tool_calls` in the agent's own tool names, and its `role: tool`
messages come back to the responder as tool_result blocks (chat_tools.py does the translation).
`stream: true` is answered with SSE chunks (and a usage chunk when `stream_options.include_usage`).
Each record keeps the Anthropic-shaped body the responder saw as `canonical`.

`supports_json_schema = False` makes it answer 400 to `response_format: json_schema`, as a server
without structured output does; `rejected_credentials` makes it answer 401 to those keys.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .chat_tools import as_messages_body, completion, reply_text, stream_chunks
from .local_server import FakeHandler, RequestRecord, bind
from .messages import classify
from .replies import ApiError, Reply, estimate_tokens
from .server import RecordingFake, Responder

__all__ = ["ChatRequest", "FakeChatCompletionsAPI", "as_messages_body"]

ROUTES = ("/v1/chat/completions", "/chat/completions")


@dataclass
class ChatRequest(RequestRecord):
    """One request as the fake saw it; `channel` as the Messages fake's ("agent" for the middle agent)."""

    channel: str | None = None
    reply: dict[str, Any] = field(default_factory=dict)
    canonical: dict[str, Any] = field(default_factory=dict)  # the Messages API body the responder saw


class FakeChatCompletionsAPI(RecordingFake[ChatRequest]):
    """Serves POST /v1/chat/completions on 127.0.0.1 (an ephemeral port); `base_url` ends in /v1."""

    _name = "fake-chat-completions-api"

    def __init__(self, responder: Responder | None = None, *, supports_json_schema: bool = True,
                 max_completion_tokens_only: bool = False, v1_only: bool = False, host: str = "127.0.0.1",
                 port: int = 0):
        super().__init__(responder, host, port)
        # As Ollama, vLLM and LM Studio: only /v1/chat/completions; a base_url without /v1 gets a 404.
        self.v1_only = v1_only
        self.supports_json_schema = supports_json_schema
        # As OpenAI's reasoning models: `max_tokens` refused with a 400 naming max_completion_tokens.
        self.max_completion_tokens_only = max_completion_tokens_only

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        return bind(_Handler, self)

    def __enter__(self) -> "FakeChatCompletionsAPI":
        return self.start()  # type: ignore[no-any-return]

    @property
    def base_url(self) -> str:
        """The address to configure as `[agent] base_url` (OpenAI clients append /chat/completions)."""
        return f"http://{self._address[0]}:{self._port}/v1"



class _Handler(FakeHandler):
    fake: FakeChatCompletionsAPI

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        _, body = self._read_body()
        route = parts.path.rstrip("/")
        routes = ROUTES[:1] if self.fake.v1_only else ROUTES
        ok = self.command == "POST" and route in routes and isinstance(body, dict)
        canonical = as_messages_body(body) if ok else {}
        record = ChatRequest(method=self.command, path=parts.path, query=dict(parse_qsl(parts.query)),
                             headers={k.lower(): v for k, v in self.headers.items()}, body=body,
                             channel=classify(canonical) if ok else None, canonical=canonical)
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
            result = self.fake.responder.respond(record.channel or "aux", record.canonical)
        except Exception as exc:  # a broken script must fail visibly, not hang the client
            return self._error(record, 500, f"The fake responder raised {type(exc).__name__}: {exc}", "server_error")
        if isinstance(result, ApiError):
            if result.raw is not None:
                record.reply = {"status": result.status, "error": result.message}
                return self._send_raw(result.status, result.raw, result.cut, result.headers)
            return self._error(record, result.status, result.message, result.error_code, error_type=result.type,
                               headers=result.headers)
        self._send_completion(record, result)

    def _send_completion(self, record: ChatRequest, result: Reply) -> None:
        body = record.body
        model, tools = str(body.get("model") or "fake"), body.get("tools")
        usage = {"prompt_tokens": estimate_tokens(body.get("messages")),
                 "completion_tokens": estimate_tokens(result.content)}
        if result.usage:  # a script's Messages API usage, in this API's names
            usage["prompt_tokens"] = result.usage.get("input_tokens", usage["prompt_tokens"])
            usage["completion_tokens"] = result.usage.get("output_tokens", usage["completion_tokens"])
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        calls = [{"tool_use": b.get("name")} for b in result.content if b.get("type") == "tool_use"]
        record.reply = {"status": 200, "content": reply_text(result)[:200], **({"tool_calls": calls} if calls else {})}
        if not body.get("stream"):
            return self._send_json(200, completion(result, model, tools, usage))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        chunks = stream_chunks(result, model, tools, usage if include_usage else None)
        data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, record: ChatRequest, status: int, message: str, code: str, *, error_type: str | None = None,
               headers: dict[str, str] | None = None) -> None:
        record.reply = {"status": status, "error": message}
        self._send_json(status, {"error": {"message": message, "type": error_type or code, "code": code,
                                           "param": None}}, headers=headers)

