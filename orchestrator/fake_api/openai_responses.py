"""A scripted fake of the OpenAI Responses API (`POST /v1/responses`, streamed as SSE), what the
Codex CLI talks to; it records every request.

Each request is translated into the canonical Anthropic-shaped body the responders read
(`responses_to_canonical`): the developer messages become `system`, with the `<cwd>` of Codex's
environment context added as a `Primary working directory:` line; user and assistant messages,
tool calls and tool outputs become `messages` with text / tool_use / tool_result blocks; the tools
Codex offers become the Claude Code tools they stand for. The canonical reply is translated back
(`canonical_to_items`): text into a message item, and Claude Code's tools into Codex's own:
`Write` / `Edit` into an `apply_patch` call (the freeform patch grammar), `Bash` / `Read` into an
`exec_command` call. An ApiError becomes an HTTP error in OpenAI's shape.

Facts about Codex CLI 0.171.0 this fake relies on (observed against it):
- One `POST {base_url}/responses` per model round trip, `stream: true`, `Authorization: Bearer`
  with the provider's `env_key` value; no `instructions` field: the system prompt is in
  `role: "developer"` messages of `input`, the cwd in a user message's `<environment_context>`.
- The whole conversation is resent each time (`store: false`, no previous_response_id); a tool
  call comes back in `input` as the item the fake sent, followed by its `function_call_output` /
  `custom_tool_call_output` (same `call_id`).
- Tools depend on the model's bundled metadata: `gpt-5.5` gets `exec_command` (function, args
  `{"cmd"}`) and `apply_patch` (custom, freeform grammar); an unknown model gets no apply_patch.
- It reads `response.output_item.done` items and `response.completed` (its `usage`); deltas are
  optional. An HTTP 4xx ends the turn; 5xx/429 are retried `request_max_retries` times.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .local_server import FakeHandler, RequestRecord, bind
from .messages import classify
from .replies import ApiError, Reply, estimate_tokens, new_id
from .server import RecordingFake, Responder

__all__ = ["FakeResponsesAPI", "ResponsesRequest", "canonical_to_items", "responses_to_canonical"]

ROUTES = ("/v1/responses", "/responses")
_CWD_RE = re.compile(r"<cwd>([^<]+)</cwd>")
# User messages Codex writes itself; the canonical body keeps them in `system`, so the last user
# message is the prompt alone, as in Claude Code's requests.
_HARNESS_TAGS = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
_EXIT_RE = re.compile(r"Process exited with code (-?\d+)")

# Codex's tools and the Claude Code tool each one stands for, in the canonical body's `tools`.
_CANONICAL_TOOLS = {
    "apply_patch": ("Write", "Edit"),
    "exec_command": ("Bash", "Read"),
    "shell": ("Bash", "Read"),
}


@dataclass
class ResponsesRequest(RequestRecord):
    """One request as the fake saw it: `channel` as the Messages fake's, `canonical` the body the
    responder was asked with (Anthropic-shaped), `reply` a short record of the answer."""

    channel: str | None = None
    canonical: dict[str, Any] = field(default_factory=dict)
    reply: dict[str, Any] = field(default_factory=dict)


class FakeResponsesAPI(RecordingFake[ResponsesRequest]):
    """Serves POST /v1/responses on 127.0.0.1 (an ephemeral port); `base_url` ends in /v1."""

    _name = "fake-responses-api"

    def __init__(self, responder: Responder | None = None, host: str = "127.0.0.1", port: int = 0):
        super().__init__(responder, host, port)
        # The canonical tool_use each call id stood for, so the next request's history shows the
        # responder exactly what it asked for (a patch parsed back would lose e.g. Read vs Bash).
        self._calls: dict[str, dict[str, Any]] = {}
        self._calls_lock = threading.Lock()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        return bind(_Handler, self)

    def __enter__(self) -> "FakeResponsesAPI":
        return self.start()  # type: ignore[no-any-return]

    @property
    def base_url(self) -> str:
        """The provider's `base_url` (Codex appends /responses)."""
        return f"http://{self._address[0]}:{self._port}/v1"


    def canonical_requests(self, channel: str = "coding_agent") -> list[dict[str, Any]]:
        """The Anthropic-shaped bodies the responder was asked with on `channel`, oldest first."""
        return [r.canonical for r in self.requests_for(channel)]

    def remember(self, call_id: str, block: dict[str, Any]) -> None:
        with self._calls_lock:
            self._calls[call_id] = block

    def recall(self, call_id: str) -> dict[str, Any] | None:
        with self._calls_lock:
            return self._calls.get(call_id)


# -- Responses request -> canonical body ---------------------------------------------------------

def _item_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(c.get("text") or "") for c in content or []
                     if isinstance(c, dict) and c.get("type") in ("input_text", "output_text", "text"))


def parse_patch(patch: str, cwd: str | None) -> dict[str, Any] | None:
    """A single-file apply_patch as Claude Code's Write (Add File) or Edit (Update File), or None."""
    lines = patch.splitlines()
    files = [ln for ln in lines if ln.startswith(("*** Add File: ", "*** Update File: ", "*** Delete File: "))]
    if len(files) != 1:
        return None
    header = files[0]
    path = header.split(": ", 1)[1].strip()
    if cwd and not path.startswith("/"):
        path = cwd.rstrip("/") + "/" + path
    body = lines[lines.index(header) + 1:]
    body = [ln for ln in body if not ln.startswith("*** ")]
    if header.startswith("*** Add File: "):
        return {"name": "Write", "input": {"file_path": path, "content": "".join(ln[1:] + "\n" for ln in body)}}
    if header.startswith("*** Update File: "):
        old = [ln[1:] for ln in body if ln.startswith(("-", " "))]
        new = [ln[1:] for ln in body if ln.startswith(("+", " "))]
        return {"name": "Edit", "input": {"file_path": path, "old_string": "\n".join(old),
                                          "new_string": "\n".join(new)}}
    return None


def _as_tool_use(item: dict[str, Any], fake: FakeResponsesAPI | None, cwd: str | None) -> dict[str, Any]:
    call_id = str(item.get("call_id") or item.get("id") or "")
    known = fake.recall(call_id) if fake is not None else None
    if known is not None:
        return {"type": "tool_use", "id": call_id, "name": known["name"], "input": dict(known["input"])}
    name = str(item.get("name") or "")
    if item.get("type") == "custom_tool_call":
        raw = str(item.get("input") or "")
        parsed = parse_patch(raw, cwd) if name == "apply_patch" else None
        block = parsed or {"name": name, "input": {"input": raw}}
    else:
        try:
            args = json.loads(item.get("arguments") or "{}")
        except ValueError:
            args = {"arguments": item.get("arguments")}
        if name in ("exec_command", "shell") and isinstance(args, dict):
            cmd = args.get("cmd") if name == "exec_command" else args.get("command")
            block = {"name": "Bash", "input": {"command": " ".join(cmd) if isinstance(cmd, list) else str(cmd)}}
        else:
            block = {"name": name, "input": args if isinstance(args, dict) else {"arguments": args}}
    return {"type": "tool_use", "id": call_id, **block}


def _output_failed(item: dict[str, Any]) -> bool:
    """Whether a tool output says its call failed: a patch not applied, or a non-zero exit."""
    output = str(item.get("output") if not isinstance(item.get("output"), list) else _item_text(item["output"]))
    if item.get("type") == "custom_tool_call_output":
        return "Success." not in output
    code = _EXIT_RE.search(output)
    return bool(code and code.group(1) != "0")


def _harness(text: str) -> bool:
    """Whether a user message is context Codex adds (environment, AGENTS.md), not the prompt."""
    return text.lstrip().startswith(_HARNESS_TAGS)


def responses_to_canonical(body: dict[str, Any], fake: FakeResponsesAPI | None = None) -> dict[str, Any]:
    """A Responses API request body as an Anthropic Messages body (see the module docstring)."""
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    system_parts = [str(body["instructions"])] if body.get("instructions") else []
    cwd: str | None = None
    messages: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})

    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            text = _item_text(item.get("content"))
            found = _CWD_RE.search(text)
            if found and cwd is None:
                cwd = found.group(1).strip()
            if item.get("role") in ("developer", "system") or (item.get("role") == "user" and _harness(text)):
                system_parts.append(text)
            elif item.get("role") in ("user", "assistant") and text:
                add(str(item["role"]), {"type": "text", "text": text})
        elif kind in ("function_call", "custom_tool_call"):
            add("assistant", _as_tool_use(item, fake, cwd))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            add("user", {"type": "tool_result", "tool_use_id": str(item.get("call_id") or ""),
                         "content": output if isinstance(output, str) else _item_text(output),
                         "is_error": _output_failed(item)})
    if cwd:
        system_parts.append(f"Primary working directory: {cwd}")
    tools: list[dict[str, Any]] = []
    for tool in body.get("tools") or []:
        name = tool.get("name") if isinstance(tool, dict) else None
        for canonical in _CANONICAL_TOOLS.get(str(name), ()):
            if all(t["name"] != canonical for t in tools):
                tools.append({"name": canonical, "description": f"Codex's {name}", "input_schema": {"type": "object"}})
    return {"model": body.get("model"), "system": "\n\n".join(system_parts), "messages": messages,
            "tools": tools, "stream": bool(body.get("stream"))}


# -- canonical reply -> Responses output items ---------------------------------------------------

def write_patch(path: str, content: str) -> str:
    """Claude Code's Write as an apply_patch that adds (or replaces) the whole file."""
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the patch format ends every line with a newline; a missing last one is added
    added = "".join("+" + ln + "\n" for ln in lines)
    return "*** Begin Patch\n*** Add File: " + path + "\n" + added + "*** End Patch\n"


def edit_patch(path: str, old: str, new: str) -> str:
    """Claude Code's Edit as an apply_patch hunk replacing `old` with `new`."""
    hunk = "".join("-" + ln + "\n" for ln in old.split("\n")) + "".join("+" + ln + "\n" for ln in new.split("\n"))
    return "*** Begin Patch\n*** Update File: " + path + "\n@@\n" + hunk + "*** End Patch\n"


def _shell_call(call_id: str, command: str, tool_names: set[str]) -> dict[str, Any]:
    if "exec_command" not in tool_names and "shell" in tool_names:
        args: dict[str, Any] = {"command": ["bash", "-lc", command]}
        name = "shell"
    else:
        args, name = {"cmd": command}, "exec_command"
    return {"type": "function_call", "id": new_id("fc_"), "call_id": call_id, "name": name,
            "arguments": json.dumps(args), "status": "completed"}


def canonical_to_items(reply: Reply, tool_names: set[str]) -> list[dict[str, Any]]:
    """The reply's content blocks as Responses output items; each tool_use gets a call id (its own
    `id` when it has one). `tool_names` are the tools the request offered."""
    items: list[dict[str, Any]] = []
    for block in reply.content:
        kind = block.get("type")
        if kind == "text":
            items.append({"type": "message", "id": new_id("msg_"), "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": block.get("text", ""), "annotations": []}]})
            continue
        if kind != "tool_use":
            continue
        call_id = str(block.get("id") or new_id("call_"))
        name, args = block.get("name"), dict(block.get("input") or {})
        if name == "Write":
            patch = write_patch(str(args.get("file_path")), str(args.get("content") or ""))
        elif name == "Edit":
            patch = edit_patch(str(args.get("file_path")), str(args.get("old_string") or ""),
                               str(args.get("new_string") or ""))
        elif name == "Bash":
            items.append(_shell_call(call_id, str(args.get("command") or ""), tool_names))
            continue
        elif name == "Read":
            path = str(args.get("file_path") or "")
            items.append(_shell_call(call_id, "cat -- '" + path.replace("'", "'\\''") + "'", tool_names))
            continue
        else:  # a tool of Codex's own, called by its name with these arguments
            items.append({"type": "function_call", "id": new_id("fc_"), "call_id": call_id, "name": str(name),
                          "arguments": json.dumps(args), "status": "completed"})
            continue
        items.append({"type": "custom_tool_call", "id": new_id("ctc_"), "call_id": call_id, "name": "apply_patch",
                      "input": patch, "status": "completed"})
    return items


def _usage(reply: Reply, body: dict[str, Any], items: list[dict[str, Any]]) -> dict[str, Any]:
    scripted = reply.usage or {}
    input_tokens = int(scripted.get("input_tokens", estimate_tokens(body.get("input"))))
    output_tokens = int(scripted.get("output_tokens", estimate_tokens(items)))
    cached = int(scripted.get("cache_read_input_tokens", 0))
    return {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens}


def sse_events(response_id: str, model: str, items: list[dict[str, Any]],
               usage: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE sequence of one streamed response, as the Responses API sends it."""
    base = {"id": response_id, "object": "response", "model": model}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": {**base, "status": "in_progress", "output": []}}),
    ]
    for i, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": i,
                                                          "item": {**item, "status": "in_progress", "content": []}}))
            events.append(("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"],
                                                          "output_index": i, "content_index": 0, "delta": text}))
        else:
            events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": i,
                                                          "item": item}))
        events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": i,
                                                     "item": item}))
    events.append(("response.completed", {"type": "response.completed",
                                          "response": {**base, "status": "completed", "output": items,
                                                       "usage": usage}}))
    return events


class _Handler(FakeHandler):
    fake: FakeResponsesAPI

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        try:
            body: Any = json.loads(raw) if raw and encoding in ("", "gzip", "identity") else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        route = parts.path.rstrip("/")
        ok = self.command == "POST" and route in ROUTES and isinstance(body, dict)
        canonical = responses_to_canonical(body, self.fake) if ok else {}
        record = ResponsesRequest(method=self.command, path=parts.path, query=dict(parse_qsl(parts.query)),
                                  headers={k.lower(): v for k, v in self.headers.items()}, body=body,
                                  channel=classify(canonical) if ok else None, canonical=canonical)
        self.fake._record(record)
        try:
            self._route(ok, encoding, record)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (e.g. a killed Codex)

    def _route(self, ok: bool, encoding: str, record: ResponsesRequest) -> None:
        auth = self.headers.get("Authorization", "")
        if any(c and c in auth for c in self.fake.rejected_credentials):
            return self._error(record, ApiError(401, "Incorrect API key provided (scripted by the fake)."))
        if not auth.lower().startswith("bearer ") or not auth[7:].strip():
            return self._error(record, ApiError(401, "No API key: send Authorization: Bearer <key>."))
        if encoding not in ("", "gzip", "identity"):
            return self._error(record, ApiError(415, f"The fake reads gzip or plain bodies, not {encoding}."))
        if not ok:
            return self._error(record, ApiError(404, f"Not found: {self.command} {record.path} (the fake "
                                                     "serves POST /v1/responses with a JSON body)"))
        try:
            result = self.fake.responder.respond(record.channel or "aux", record.canonical)
        except Exception as exc:  # a broken script must fail visibly, not hang the client
            result = ApiError(500, f"The fake responder raised {type(exc).__name__}: {exc}")
        if isinstance(result, ApiError):
            return self._error(record, result)
        tool_names = {str(t.get("name")) for t in record.body.get("tools") or [] if isinstance(t, dict)}
        items = canonical_to_items(result, tool_names)
        # One call item per tool_use, in order: remembered so the next request reads as scripted.
        calls = [i for i in items if i["type"] != "message"]
        uses = [b for b in result.content if b.get("type") == "tool_use"]
        for item, block in zip(calls, uses):
            self.fake.remember(item["call_id"], {"name": block.get("name"), "input": dict(block.get("input") or {})})
        usage = _usage(result, record.body, items)
        record.reply = {"status": 200, "items": [i.get("name") or i["type"] for i in items], "usage": usage}
        data = "".join(f"event: {name}\ndata: {json.dumps(event)}\n\n"
                       for name, event in sse_events(new_id("resp_"), str(record.body.get("model") or "fake"),
                                                     items, usage)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, record: ResponsesRequest, error: ApiError) -> None:
        record.reply = {"status": error.status, "error": error.message}
        if error.raw is not None:
            return self._send_raw(error.status, error.raw, error.cut, error.headers)
        payload = {"error": {"message": error.message, "type": error.type, "code": error.error_code, "param": None}}
        data = json.dumps(payload).encode()
        self.send_response(error.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in error.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
