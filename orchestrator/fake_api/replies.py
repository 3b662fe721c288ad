"""Reply values for the fake Messages API (text / tool_use blocks, HTTP errors) and their wire form."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Union

# Error `type` the real API uses for each HTTP status (clients branch on it, e.g. for retries).
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Reply:
    """One assistant message: content blocks plus optional usage / stop_reason overrides."""

    content: list[dict[str, Any]]
    usage: dict[str, int] | None = None  # None: a crude estimate from the request and reply
    stop_reason: str | None = None  # None: "tool_use" when a block is tool_use, else "end_turn"


@dataclass(frozen=True)
class ApiError:
    """Make the fake answer with an HTTP error in the Anthropic error JSON shape."""

    status: int = 500
    message: str = "Internal server error (scripted by the fake Messages API)."
    error_type: str | None = None  # None: the type the real API uses for `status`
    headers: dict[str, str] = field(default_factory=dict)
    # A broken answer instead of the error JSON (see broken_reply): this text sent as the body,
    # and with `cut` a Content-Length promising more than is sent before the connection closes.
    raw: str | None = None
    cut: bool = False
    # OpenAI's shape has a code beside the type (404 "invalid_request_error" / "model_not_found",
    # 429 "insufficient_quota"), which CLIs read: None, the type (the OpenAI-shaped fakes only).
    code: str | None = None

    @property
    def type(self) -> str:
        return self.error_type or ERROR_TYPES.get(self.status, "api_error")

    @property
    def error_code(self) -> str:
        return self.code or self.type

    def body(self) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": self.type, "message": self.message},
            "request_id": new_id("req_"),
        }


# What a script may hold: a finished reply, an error, a bare string (one text block), or a
# callable computing one of those from the request body (e.g. an absolute path under its cwd).
ReplyLike = Union[Reply, ApiError, str, Callable[[dict[str, Any]], Any]]


def new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


def tool_use(name: str, input: dict[str, Any], id: str | None = None) -> dict[str, Any]:
    """A tool_use content block; a unique `toolu_...` id is assigned when the reply is sent."""
    block: dict[str, Any] = {"type": "tool_use", "name": name, "input": dict(input)}
    if id:
        block["id"] = id
    return block


def reply(*blocks: dict[str, Any] | str, usage: dict[str, int] | None = None,
          stop_reason: str | None = None) -> Reply:
    """A reply holding several blocks, e.g. reply(text("Writing it."), tool_use("Write", {...}))."""
    content = [text(b) if isinstance(b, str) else dict(b) for b in blocks]
    return Reply(content=content, usage=usage, stop_reason=stop_reason)


def api_error(status: int = 500, message: str | None = None, error_type: str | None = None,
              headers: dict[str, str] | None = None, code: str | None = None) -> ApiError:
    """An HTTP error reply, e.g. api_error(400, "prompt is too long"); `code`: OpenAI's error code,
    e.g. api_error(404, "The model `x` does not exist", "invalid_request_error", code="model_not_found")."""
    return ApiError(status=status, message=message or ApiError.message, error_type=error_type,
                    headers=dict(headers or {}), code=code)


def broken_reply(raw: str = '{"id": "msg_cut', *, status: int = 200, cut: bool = False) -> ApiError:
    """An answer a client cannot read: `raw` as the body (JSON cut short by default, or any text
    such as a proxy's HTML page), with `cut` the connection closed before the promised length."""
    return ApiError(status=status, message=f"a broken reply (scripted): {raw[:40]!r}", raw=raw, cut=cut)


def resolve(item: ReplyLike, body: dict[str, Any]) -> Reply | ApiError:
    """Turn a script item into a Reply or ApiError (calling it with the request body if callable)."""
    if callable(item) and not isinstance(item, (Reply, ApiError)):
        item = item(body)
    if isinstance(item, str):
        return reply(text(item))
    if isinstance(item, dict):  # a single bare block
        return reply(item)
    if isinstance(item, (Reply, ApiError)):
        return item
    raise TypeError(f"a fake reply must be a Reply, ApiError, str or block dict, not {item!r}")


def estimate_tokens(payload: Any) -> int:
    """Crude token count (about 4 characters a token), the same for count_tokens and usage."""
    return max(1, len(json.dumps(payload, ensure_ascii=False)) // 4)


def to_message(r: Reply, model: str, request_body: dict[str, Any]) -> dict[str, Any]:
    """The full non-streaming Messages API response for a reply (ids assigned here)."""
    content = []
    for block in r.content:
        block = dict(block)
        if block.get("type") == "tool_use" and not block.get("id"):
            block["id"] = new_id("toolu_")
        content.append(block)
    stop = r.stop_reason or ("tool_use" if any(b["type"] == "tool_use" for b in content)
                             else "end_turn")
    usage = {
        "input_tokens": estimate_tokens({k: request_body.get(k) for k in ("system", "messages")}),
        "output_tokens": estimate_tokens(content),
    }
    usage.update(r.usage or {})
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def sse_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE event sequence that streams `message`, in the order the real API sends them."""
    usage = message["usage"]
    start = dict(message, content=[], stop_reason=None,
                 usage=dict(usage, output_tokens=min(1, usage.get("output_tokens", 0))))
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start}),
                                                ("ping", {"type": "ping"})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            empty = dict(block, input={})
            raw = json.dumps(block["input"], ensure_ascii=False)
            # Split the JSON in two so clients really have to assemble partial_json deltas.
            half = len(raw) // 2
            deltas = [{"type": "input_json_delta", "partial_json": part} for part in (raw[:half], raw[half:])]
        else:
            empty = dict(block, text="")
            deltas = [{"type": "text_delta", "text": block.get("text", "")}]
        events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": empty}))
        for d in deltas:
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                     "usage": usage}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def summarize(result: Reply | ApiError, message: dict[str, Any] | None = None) -> dict[str, Any]:
    """A short record of what the fake answered, kept with each RecordedRequest."""
    if isinstance(result, ApiError):
        return {"status": result.status, "error": result.message}
    assert message is not None
    blocks = [b.get("text", "")[:200] if b["type"] == "text" else {"tool_use": b["name"], "id": b["id"]}
              for b in message["content"]]
    return {"status": 200, "stop_reason": message["stop_reason"], "content": blocks,
            "usage": message["usage"]}


STRUCTURED_OUTPUT_TOOL = "StructuredOutput"  # Claude Code's tool for `--json-schema` (2.1.330)


def as_structured_output(r: Reply, request_body: dict[str, Any]) -> Reply:
    """A reply that is one JSON object in text, to a request offering Claude Code's StructuredOutput
    tool (`claude -p --json-schema`), becomes that tool's call, as a real model answers there; a
    script then reads the same for every way the middle agent reaches its model. Any other reply
    (not JSON, tool calls already) is sent as scripted."""
    tools = request_body.get("tools") or []
    if not any(isinstance(t, dict) and t.get("name") == STRUCTURED_OUTPUT_TOOL for t in tools):
        return r
    if len(r.content) != 1 or r.content[0].get("type") != "text":
        return r
    try:
        data = json.loads(r.content[0].get("text", ""))
    except ValueError:
        return r
    if not isinstance(data, dict):
        return r
    return Reply(content=[{"type": "tool_use", "name": STRUCTURED_OUTPUT_TOOL, "input": data}], usage=r.usage)
