"""A local fake of the Anthropic Messages API (JSON and SSE) that records every request.

Facts about Claude Code 2.1.330 this fake relies on (observed against this server):
- Every call is `POST /v1/messages?beta=true` with `stream: true`, header `x-api-key`
  (`Authorization: Bearer` when ANTHROPIC_AUTH_TOKEN is used instead; the Python SDK 2.x sends
  Bearer for its api_key too), `anthropic-beta`, `x-app: cli`, `X-Claude-Code-Session-Id`;
  model `claude-opus-5-5` unless `--model` is given.
- The main loop always sends a non-empty `tools` list (even with --allowedTools, which only
  grants permission) and `system` as a list of text blocks. In `-p` mode with
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 no side requests (title, topic, quota) were seen;
  anything without tools is still answered, on the "aux" channel.
- The working directory is not in the system prompt: it is in a `role: "system"` message inside
  `messages` ("- Primary working directory: /abs/path"); see messages.working_directory.
- A 400 makes it retry a few times at once with fewer betas, then give up; 5xx/429 are retried
  10 times with backoff (minutes) unless CLAUDE_CODE_MAX_RETRIES is set (0 = no retry).
- Cost (`total_cost_usd`) is computed from the `usage` in message_start / message_delta; no
  other host is contacted with the env from env.claude_code_env (checked with strace).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import parse_qsl, urlsplit

from .cloud import bedrock_event_stream, cloud_route, google_token_reply
from .local_server import FakeHandler, LocalServer, RequestRecord, bind
from .messages import classify
from .replies import (
    ApiError,
    Reply,
    api_error,
    as_structured_output,
    estimate_tokens,
    sse_events,
    summarize,
    to_message,
)
from .scripted import ScriptedResponder


class Responder(Protocol):
    """Decides the reply to one /v1/messages request on a channel ("agent", "worker", "aux")."""

    def respond(self, channel: str, body: dict[str, Any]) -> Reply | ApiError: ...


@dataclass
class RecordedRequest(RequestRecord):
    """One request as the fake saw it; `channel` is None for anything but message generation."""

    channel: str | None = None
    reply: dict[str, Any] = field(default_factory=dict)  # filled in once the fake has answered
    cloud: str | None = None  # "bedrock" or "vertex" when it came on that cloud's route (fake_api.cloud)


R = TypeVar("R", bound=RequestRecord)


class RecordingFake(LocalServer, Generic[R]):
    """What every fake of a model API shares: the responder that decides each reply, the
    credentials it refuses, and the record of what it received."""

    def __init__(self, responder: Responder | None, host: str, port: int):
        super().__init__(host, port)
        self.responder: Responder = responder if responder is not None else ScriptedResponder()
        self.rejected_credentials: set[str] = set()  # refused with a 401 (tests of a wrong credential)
        self._lock = threading.Lock()
        self._requests: list[R] = []

    @property
    def script(self) -> ScriptedResponder:
        """The ScriptedResponder, for `fake.script.coding_agent(...)`; an error for other responders."""
        if not isinstance(self.responder, ScriptedResponder):
            raise TypeError(f"this fake answers with {type(self.responder).__name__}, not a ScriptedResponder")
        return self.responder

    @property
    def requests(self) -> list[R]:
        """A snapshot of every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, channel: str) -> list[R]:
        """The requests the fake told apart as `channel` ("agent", "coding_agent", "aux")."""
        return [r for r in self.requests if getattr(r, "channel", None) == channel]

    def _record(self, request: R) -> None:
        with self._lock:
            self._requests.append(request)


class FakeMessagesAPI(RecordingFake[RecordedRequest]):
    """Serves POST /v1/messages and /v1/messages/count_tokens on 127.0.0.1 (an ephemeral port), and
    the same Messages API on Bedrock's and Vertex's routes (see fake_api.cloud)."""

    _name = "fake-messages-api"

    def __init__(self, responder: Responder | None = None, host: str = "127.0.0.1", port: int = 0):
        # rejected_credentials here: 401, 403 on Bedrock's route (as AWS does), for a request whose
        # x-api-key or Authorization header contains one (an API key, an AWS access key id, a
        # Google access token), or a token request whose form body does.
        super().__init__(responder, host, port)
        # False: a request with `output_config` (structured output) gets a 400 naming it, as from a
        # cloud region or a gateway that does not have it.
        self.supports_structured_output = True

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        return bind(_Handler, self)

    def start(self) -> "FakeMessagesAPI":
        return super().start()  # type: ignore[no-any-return]

    def __enter__(self) -> "FakeMessagesAPI":
        return self.start()

    @property
    def base_url(self) -> str:
        return f"http://{self._address[0]}:{self._port}"

    # -- the record ----------------------------------------------------------------------------

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()


class _Handler(FakeHandler):
    fake: FakeMessagesAPI

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        raw, body = self._read_body()
        self._raw_body = raw.decode("utf-8", "replace")
        route = parts.path.rstrip("/")
        cloud = cloud_route(route) if self.command == "POST" else None
        self._path_model = cloud.model if cloud is not None else None  # the cloud routes name it in the path
        self._bedrock_stream = cloud is not None and cloud.stream
        is_generation = self.command == "POST" and (route == "/v1/messages" or cloud is not None) \
            and isinstance(body, dict)
        record = RecordedRequest(
            method=self.command, path=parts.path, query=dict(parse_qsl(parts.query)),
            headers={k.lower(): v for k, v in self.headers.items()}, body=body,
            channel=classify(body) if is_generation else None, cloud=cloud.cloud if cloud is not None else None,
        )
        self.fake._record(record)  # before replying, so a slow reply is already visible
        try:
            self._route("/v1/messages" if cloud is not None else route, record)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (e.g. a killed Claude Code); nothing to answer

    def _route(self, route: str, record: RecordedRequest) -> None:
        if self._rejected():
            status = 403 if record.path.startswith("/model/") else 401
            if route == "/token":  # as Google's token endpoint refuses a revoked key or grant
                record.reply = {"status": 400, "error": "invalid_grant"}
                return self._send_json(400, {"error": "invalid_grant", "error_description": "Bad Request"})
            return self._error(record, api_error(status, "The credentials were rejected (scripted by the fake)."))
        if route == "/token" and self.command == "POST":
            record.reply = {"status": 200, "token": True}
            return self._send_json(200, google_token_reply())
        if not self._authorized():
            return self._error(record, api_error(401, "No API key: send the x-api-key header or "
                                                      "Authorization: Bearer <key>."))
        if self.command != "POST" or route not in ("/v1/messages", "/v1/messages/count_tokens"):
            return self._error(record, api_error(404, f"Not found: {self.command} {record.path} "
                                                      "(the fake serves POST /v1/messages only)."))
        if not isinstance(record.body, dict):
            return self._error(record, api_error(400, "The request body must be a JSON object."))
        if "output_config" in record.body and not self.fake.supports_structured_output:
            return self._error(record, api_error(400, "output_config: Extra inputs are not permitted"))
        if route == "/v1/messages/count_tokens":
            tokens = estimate_tokens({k: record.body.get(k) for k in ("system", "messages", "tools")})
            record.reply = {"status": 200, "input_tokens": tokens}
            return self._send_json(200, {"input_tokens": tokens})
        try:
            result = self.fake.responder.respond(record.channel or "aux", record.body)
        except Exception as exc:  # a broken script must fail visibly, not hang the client
            result = api_error(500, f"The fake Messages API responder raised {type(exc).__name__}: {exc}")
        if isinstance(result, ApiError):
            return self._error(record, result)
        result = as_structured_output(result, record.body)
        model = record.body.get("model") or self._path_model or "claude-fake"
        message = to_message(result, str(model), record.body)
        record.reply = summarize(result, message)
        if self._bedrock_stream:
            return self._send_event_stream(message)
        if record.body.get("stream"):
            return self._send_sse(message)
        return self._send_json(200, message)

    def _authorized(self) -> bool:
        if self.headers.get("x-api-key"):
            return True
        auth = self.headers.get("Authorization", "")
        if auth.startswith("AWS4-HMAC-SHA256 Credential="):  # Bedrock: SigV4 (not verified)
            return True
        return auth.lower().startswith("bearer ") and bool(auth[7:].strip())

    def _rejected(self) -> bool:
        sent = f"{self.headers.get('x-api-key', '')} {self.headers.get('Authorization', '')}"
        if self.path.rstrip("/") == "/token":  # a form body: grant_type=...&assertion=<signed JWT>
            sent += " " + str(getattr(self, "_raw_body", ""))
        return any(c and c in sent for c in self.fake.rejected_credentials)

    def _error(self, record: RecordedRequest, error: ApiError) -> None:
        record.reply = summarize(error)
        if error.raw is not None:
            return self._send_raw(error.status, error.raw, error.cut, error.headers)
        self._send_json(error.status, error.body(), error.headers)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        request_id = payload.get("request_id", "req_fake") if isinstance(payload, dict) else "req_fake"
        super()._send_json(status, payload, {"request-id": request_id, **(headers or {})})

    def _send_event_stream(self, message: dict[str, Any]) -> None:
        data = bedrock_event_stream([event for _, event in sse_events(message)])
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.amazon.eventstream")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-requestid", "req_fake")
        self.end_headers()
        self.wfile.write(data)

    def _send_sse(self, message: dict[str, Any]) -> None:
        data = "".join(f"event: {name}\ndata: {json.dumps(event)}\n\n" for name, event in sse_events(message)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_fake")
        self.end_headers()
        self.wfile.write(data)
