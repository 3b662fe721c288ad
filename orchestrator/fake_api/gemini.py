"""A scripted fake of the Gemini API (what the Gemini CLI calls), recording every request.

`POST /v1beta/models/{model}:generateContent`, `:streamGenerateContent?alt=sse` and `:countTokens`
are answered from the same responders as the fake Messages API (a ScriptedResponder or the
DemoResponder): each request is translated into an Anthropic-shaped body (`system`, `messages`
with text / tool_use / tool_result blocks, `tools`), the reply's canonical blocks back into
Gemini `parts` (text, functionCall). Claude Code's tool names and inputs are the canonical ones:
`Write {file_path, content}` is the CLI's `write_file`, `Edit {file_path, old_string,
new_string}` its `replace`, `Read {file_path}` its `read_file`, `Bash {command}` its
`run_shell_command` (their parameter names as Gemini CLI 0.61.0 declares them); any other tool
name passes through unchanged.

Facts about Gemini CLI 0.61.0 this fake relies on (observed against it):
- It reaches the API at GOOGLE_GEMINI_BASE_URL with the key in `x-goog-api-key`; the main loop
  streams (`:streamGenerateContent?alt=sse`), one JSON chunk per `data:` line.
- Its working directory is in the first user message ("- **Workspace Directories:**" then
  "  - /abs/path"), not in the system instruction; the canonical body gets it as a line
  `Primary working directory: /abs/path` (what messages.working_directory reads).
- With `--model` given, no side request was seen in headless mode; with the default "auto" it
  first asks a router model for a JSON complexity score, and other side calls (the next-speaker
  check, loop detection) also ask for JSON with `responseJsonSchema`. Those have no tools, go to
  the "aux" channel, and when the reply is not JSON they get the smallest object the schema
  accepts (first enum value, "", 0, false), so the CLI never stalls on them.
- A 400 is not retried; 429 and 5xx are retried (up to `general.maxAttempts`, 10 by default).
- With gemini_env's offline_home and variables, a turn connects to nothing but this fake (checked
  with `strace -f -e trace=connect`): no update check, usage statistics or telemetry.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .local_server import FakeHandler, RequestRecord, bind
from .messages import classify
from .replies import ApiError, Reply, estimate_tokens, new_id
from .server import RecordingFake, Responder

__all__ = ["FakeGeminiAPI", "GeminiRequest", "TOOL_NAMES", "as_gemini_response", "as_messages_body"]

# Canonical (Claude Code) tool name -> the Gemini CLI's.
TOOL_NAMES = {"Write": "write_file", "Edit": "replace", "Read": "read_file", "Bash": "run_shell_command"}
_CANONICAL = {v: k for k, v in TOOL_NAMES.items()}
_ROUTE_RE = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")
_WORKSPACE_RE = re.compile(r"Workspace Directories:\**\s*\n\s*-\s*(/[^\n]+?)\s*$", re.M)
# Google's error `status` for each HTTP status (the SDK shows it with the message).
_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
           429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


@dataclass
class GeminiRequest(RequestRecord):
    """One request as the fake saw it: `canonical` is its Anthropic-shaped translation (for
    generation requests), `channel` as the Messages fake's."""

    channel: str | None = None
    canonical: dict[str, Any] | None = None
    reply: dict[str, Any] = field(default_factory=dict)


class FakeGeminiAPI(RecordingFake[GeminiRequest]):
    """Serves the Gemini API's generateContent family on 127.0.0.1 (an ephemeral port); point
    GOOGLE_GEMINI_BASE_URL at `base_url`."""

    _name = "fake-gemini-api"

    def __init__(self, responder: Responder | None = None, host: str = "127.0.0.1", port: int = 0):
        super().__init__(responder, host, port)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        return bind(_Handler, self)

    def start(self) -> "FakeGeminiAPI":
        return super().start()  # type: ignore[no-any-return]

    def __enter__(self) -> "FakeGeminiAPI":
        return self.start()

    @property
    def base_url(self) -> str:
        return f"http://{self._address[0]}:{self._port}"


    def canonical(self, channel: str = "coding_agent") -> list[dict[str, Any]]:
        """The Anthropic-shaped bodies received on `channel`, oldest first."""
        return [r.canonical for r in self.requests_for(channel) if r.canonical is not None]


# -- Gemini request -> canonical body -----------------------------------------------------------
def _text_of(content: Any) -> str:
    if isinstance(content, dict):
        return "\n".join(str(p.get("text", "")) for p in content.get("parts") or []
                         if isinstance(p, dict) and "text" in p and not p.get("thought"))
    if isinstance(content, str):
        return content
    return ""


def canonical_input(name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A Gemini CLI tool call as Claude Code's (name, input); unknown tools unchanged."""
    canonical = _CANONICAL.get(name)
    if canonical == "Write":
        return canonical, {"file_path": args.get("file_path"), "content": args.get("content")}
    if canonical == "Edit":
        return canonical, {"file_path": args.get("file_path"), "old_string": args.get("old_string"),
                           "new_string": args.get("new_string")}
    if canonical == "Read":
        return canonical, {"file_path": args.get("file_path")}
    if canonical == "Bash":
        return canonical, {"command": args.get("command")}
    return name, dict(args)


def gemini_args(name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A canonical tool call as the Gemini CLI's (name, args), with its real parameter names."""
    gname = TOOL_NAMES.get(name, name)
    if name == "Edit":
        # `instruction` is required by the CLI's replace tool (it guides its self-correction).
        return gname, {"file_path": args.get("file_path"), "instruction": "Make the edit as given.",
                       "old_string": args.get("old_string"), "new_string": args.get("new_string")}
    if name == "Bash":
        return gname, {"command": args.get("command"), "description": "Run the command."}
    return gname, dict(args)


def _response_text(response: Any) -> tuple[str, bool]:
    """A functionResponse's `response` as (text, is_error): the CLI sends {output} or {error}."""
    if not isinstance(response, dict):
        return str(response or ""), False
    if "error" in response:
        return str(response["error"]), True
    out = response.get("output", response.get("content", response))
    return (out if isinstance(out, str) else json.dumps(out)), False


def as_messages_body(body: dict[str, Any]) -> dict[str, Any]:
    """A Gemini generateContent body as an Anthropic Messages body (see the module docstring)."""
    system = _text_of(body.get("systemInstruction"))
    messages: list[dict[str, Any]] = []
    pending: list[str] = []  # ids of the last model turn's calls, to pair responses without ids
    counter = 0
    cwd = None
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        role = "assistant" if content.get("role") == "model" else "user"
        blocks: list[dict[str, Any]] = []
        if role == "assistant":
            pending = []
        for part in content.get("parts") or []:
            if not isinstance(part, dict) or part.get("thought"):
                continue
            if "text" in part:
                text = str(part["text"])
                found = cwd is None and _WORKSPACE_RE.search(text)
                if found:
                    cwd = found.group(1)
                blocks.append({"type": "text", "text": text})
            elif isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                counter += 1
                ident = str(call.get("id") or f"call_{counter}")
                name, args = canonical_input(str(call.get("name")), call.get("args") or {})
                pending.append(ident)
                blocks.append({"type": "tool_use", "id": ident, "name": name, "input": args})
            elif isinstance(part.get("functionResponse"), dict):
                resp = part["functionResponse"]
                ident = str(resp.get("id") or (pending.pop(0) if pending else f"call_{counter}"))
                text, is_error = _response_text(resp.get("response"))
                blocks.append({"type": "tool_result", "tool_use_id": ident, "content": text,
                               "is_error": is_error})
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    if cwd:
        system = f"{system}\nPrimary working directory: {cwd}" if system else f"Primary working directory: {cwd}"
    tools = []
    for group in body.get("tools") or []:
        for decl in (group or {}).get("functionDeclarations") or []:
            name = str(decl.get("name"))
            tools.append({"name": _CANONICAL.get(name, name), "description": decl.get("description", ""),
                          "input_schema": decl.get("parametersJsonSchema") or decl.get("parameters") or {}})
    out: dict[str, Any] = {"model": body.get("model"), "system": system, "messages": messages}
    if tools:
        out["tools"] = tools
    return out


# -- reply -> Gemini response --------------------------------------------------------------------
def _schema_value(schema: Any) -> Any:
    """The smallest value `schema` accepts (OpenAPI-style upper-case types too)."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: _schema_value(props.get(k)) for k in schema.get("required") or props}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return ""


def _json_answer(result: Reply, body: dict[str, Any]) -> Reply:
    """A side call asking for JSON gets JSON: the reply's text if it parses, else the schema's
    smallest value (a script rarely cares about the CLI's router or next-speaker checks)."""
    config = body.get("generationConfig") or {}
    if config.get("responseMimeType") != "application/json":
        return result
    text = "".join(b.get("text", "") for b in result.content if b.get("type") == "text")
    try:
        json.loads(text)
        return result
    except ValueError:
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        return Reply(content=[{"type": "text", "text": json.dumps(_schema_value(schema) or {})}],
                     usage=result.usage)


def _parts(result: Reply) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in result.content:
        if block.get("type") == "text":
            parts.append({"text": block.get("text", "")})
        elif block.get("type") == "tool_use":
            name, args = gemini_args(str(block.get("name")), dict(block.get("input") or {}))
            parts.append({"functionCall": {"id": block.get("id") or new_id("toolu_"), "name": name,
                                           "args": args}})
    return parts


def as_gemini_response(result: Reply, body: dict[str, Any], model: str) -> dict[str, Any]:
    """The full generateContent response for a reply (usage estimated unless the reply sets it:
    input_tokens / output_tokens become promptTokenCount / candidatesTokenCount)."""
    usage = dict(result.usage or {})
    prompt = int(usage.get("input_tokens", estimate_tokens({k: body.get(k) for k in
                                                           ("systemInstruction", "contents")})))
    output = int(usage.get("output_tokens", estimate_tokens([b for b in result.content])))
    return {
        "candidates": [{"content": {"role": "model", "parts": _parts(result)}, "finishReason": "STOP",
                        "index": 0}],
        "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": output,
                          "totalTokenCount": prompt + output},
        "modelVersion": model,
        "responseId": new_id("resp_"),
    }


def sse_chunks(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The response as stream chunks: text parts first, then the calls with finishReason and usage,
    so the CLI really has to assemble a streamed answer."""
    parts = response["candidates"][0]["content"]["parts"]
    texts = [p for p in parts if "text" in p]
    rest = [p for p in parts if "text" not in p]
    chunks = []
    if texts and rest:
        chunks.append({"candidates": [{"content": {"role": "model", "parts": texts}, "index": 0}],
                       "modelVersion": response["modelVersion"], "responseId": response["responseId"]})
        parts = rest
    last = dict(response)
    last["candidates"] = [dict(response["candidates"][0], content={"role": "model", "parts": parts})]
    chunks.append(last)
    return chunks


def error_body(error: ApiError) -> dict[str, Any]:
    """Google's error JSON shape for an ApiError."""
    return {"error": {"code": error.status, "message": error.message,
                      "status": _STATUS.get(error.status, "UNKNOWN")}}


class _Handler(FakeHandler):
    json_type = "application/json; charset=UTF-8"
    fake: FakeGeminiAPI

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        _, body = self._read_body()
        match = _ROUTE_RE.match(parts.path.rstrip("/"))
        method = match.group("method") if match else None
        generation = self.command == "POST" and method in ("generateContent", "streamGenerateContent") \
            and isinstance(body, dict)
        canonical = dict(as_messages_body(body), model=match.group("model")) if generation and match else None
        record = GeminiRequest(method=self.command, path=parts.path, query=dict(parse_qsl(parts.query)),
                               headers={k.lower(): v for k, v in self.headers.items()}, body=body,
                               channel=classify(canonical) if canonical else None, canonical=canonical)
        self.fake._record(record)
        try:
            self._route(match, method, record)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the CLI went away (e.g. killed at a timeout)

    def _route(self, match: re.Match[str] | None, method: str | None, record: GeminiRequest) -> None:
        key = self.headers.get("x-goog-api-key") or record.query.get("key") or ""
        if key and any(c and c in key for c in self.fake.rejected_credentials):
            # What the real API answers to a wrong key.
            return self._error(record, ApiError(400, "API key not valid. Please pass a valid API key."))
        if not key:
            return self._error(record, ApiError(403, "Method doesn't allow unregistered callers (callers "
                                                     "without established identity). Please use API Key."))
        if match is None or self.command != "POST" or not isinstance(record.body, dict):
            return self._error(record, ApiError(404, f"Not found: {self.command} {record.path} (the fake "
                                                     "serves POST /v1beta/models/MODEL:generateContent)."))
        model = match.group("model")
        if method == "countTokens":
            tokens = estimate_tokens(record.body.get("contents") or record.body)
            record.reply = {"status": 200, "totalTokens": tokens}
            return self._send_json(200, {"totalTokens": tokens})
        if method not in ("generateContent", "streamGenerateContent") or record.canonical is None:
            return self._error(record, ApiError(404, f"The fake does not serve the method {method!r}."))
        try:
            result = self.fake.responder.respond(record.channel or "aux", record.canonical)
        except Exception as exc:  # a broken script must fail visibly, not hang the CLI
            result = ApiError(500, f"The fake Gemini API responder raised {type(exc).__name__}: {exc}")
        if isinstance(result, ApiError):
            return self._error(record, result)
        if record.channel == "aux":
            result = _json_answer(result, record.body)
        response = as_gemini_response(result, record.body, model)
        record.reply = {"status": 200, "parts": response["candidates"][0]["content"]["parts"],
                        "usage": response["usageMetadata"]}
        if method == "streamGenerateContent":
            return self._send_sse(sse_chunks(response))
        self._send_json(200, response)

    def _error(self, record: GeminiRequest, error: ApiError) -> None:
        record.reply = {"status": error.status, "error": error.message}
        self._send_json(error.status, error_body(error))


    def _send_sse(self, chunks: list[dict[str, Any]]) -> None:
        data = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
