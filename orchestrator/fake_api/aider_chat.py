"""Aider's side of the fake Chat Completions API: its requests read as the canonical (Anthropic-shaped)
coding-agent requests the responders answer, and their canonical replies written back in aider's
`whole` edit format, so one ScriptedResponder or DemoResponder drives aider as it drives Claude Code.

Facts about aider 0.86.2 (`--edit-format whole --no-stream`) this relies on, observed against it:
- Every model call is one non-streamed `POST /v1/chat/completions` with no `tools`: the main coder's
  system message says "Take requests for changes to the supplied code." and shows the file-listing
  format with the fence it chose (``` unless a file in the chat holds one); a side call (chat
  summary, commit message) has another system message and goes to the "aux" channel.
- Its messages start with a few-shot example that ends with the user line "I switched to a new code
  base. ..." and "Ok."; the earlier turns (`--restore-chat-history`) come after it; the last user
  message is the prompt with the format reminder (also in the system message) appended.
- It applies a reply's *file listings* (a path on its own line, then the whole new content in a
  fenced block) after the reply, and sends nothing more in that turn unless an edit failed (it then
  sends the error back as a user message, "reflection").
- It never says where it runs: the agent sends the project directory (percent-encoded) in the
  `X-Middle-Project-Dir` header (`[coding_agent.options] project_dir_header`, which
  `AiderAgent.offline` turns on).

The canonical loop: a canonical reply's Write/Edit blocks become file listings (paths relative to
the project, so a path outside reads `../...`, as a model writing through aider would put it) and
its text stays text; when it had tool calls, the responder is asked again with tool_result blocks
(as Claude Code would send after running them), and that reply's text follows in the same aider
message: one aider request consumes the same replies as one Claude Code turn. Read, Bash and other
tools have no aider counterpart headless: their tool_result is an error saying so.
"""

from __future__ import annotations

import os
import posixpath
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from .local_server import bind
from .messages import classify
from .openai_chat import ChatRequest, FakeChatCompletionsAPI, _Handler, as_messages_body
from .replies import ApiError, Reply, new_id, reply, text
from .server import Responder

__all__ = ["AIDER_MARK", "PROJECT_DIR_HEADER", "AiderChatAdapter", "FakeAiderAPI",
           "canonical_body", "listing", "reply_as_aider_text"]

# What AiderAgent sends with `project_dir_header` (coding_agent/aider.py names it too: the fake must
# not import the agent; tests/fake_api/test_aider_chat.py checks the two agree).
PROJECT_DIR_HEADER = "X-Middle-Project-Dir"
AIDER_MARK = "Take requests for changes to the supplied code."  # in every aider coder's system prompt
_EXAMPLES_END = "I switched to a new code base."  # the user line that closes aider's few-shot example
_FENCE_RE = re.compile(r"path/to/filename\.js\n(\S+)\n// entire file content \.\.\.\n"
                       r"// \.\.\. goes in between\n(\S+)\n")
MAX_TOOL_ROUNDS = 10  # a script that calls tools forever must not hang aider's request
# What the canonical body offers: the tools whose effect aider can carry out (as file listings).
CANONICAL_TOOLS = [
    {"name": "Write", "description": "Write a whole file (aider: a file listing).",
     "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"},
                                                       "content": {"type": "string"}},
                      "required": ["file_path", "content"]}},
    {"name": "Edit", "description": "Replace old_string by new_string in a file (aider: a file listing).",
     "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"},
                                                       "old_string": {"type": "string"},
                                                       "new_string": {"type": "string"}},
                      "required": ["file_path", "old_string", "new_string"]}},
]


def is_aider_main(chat: dict[str, Any]) -> bool:
    """Whether a Chat Completions body is aider's main coder (not one of its side calls)."""
    return any(m.get("role") == "system" and AIDER_MARK in str(m.get("content") or "")
               for m in chat.get("messages") or [])


def fence_of(system: str) -> tuple[str, str]:
    """The fence aider asked for in its system prompt (``` unless a chat file holds one)."""
    match = _FENCE_RE.search(system)
    return (match.group(1), match.group(2)) if match else ("```", "```")


def _strip_reminder(user: str, system: str) -> str:
    """The prompt without the format reminder aider appends to the last user message (the same text
    is in its system message): cut at the first paragraph break after which all is reminder."""
    start = 0
    while (at := user.find("\n\n", start)) >= 0:
        rest = user[at:].strip()
        if len(rest) > 100 and rest in system:
            return user[:at]
        start = at + 2
    return user


def canonical_body(chat: dict[str, Any], cwd: str | None) -> dict[str, Any]:
    """Aider's main request as the canonical coding-agent request: its system message plus the
    working-directory line, the conversation after its few-shot example (earlier turns included),
    the last prompt without its format reminder, and the Write/Edit tools."""
    system = "\n".join(str(m.get("content") or "") for m in chat.get("messages") or [] if m.get("role") == "system")
    turns = [{"role": m["role"], "content": str(m.get("content") or "")}
             for m in chat.get("messages") or [] if m.get("role") in ("user", "assistant")]
    for i, message in enumerate(turns):
        if message["role"] == "user" and message["content"].startswith(_EXAMPLES_END):
            turns = turns[i + 2:]  # the example's closing "Ok." goes with it
            break
    if turns and turns[-1]["role"] == "user":
        turns[-1] = {"role": "user", "content": _strip_reminder(turns[-1]["content"], system)}
    where = f"\n\nPrimary working directory: {cwd}" if cwd else ""
    return {"model": chat.get("model"), "system": system.rstrip() + where, "messages": turns,
            "tools": CANONICAL_TOOLS, "max_tokens": chat.get("max_tokens")}


def listing(path: str, content: str, fence: tuple[str, str]) -> str:
    """One file in aider's whole format: the path on its own line, then the full content fenced."""
    body = content if content.endswith("\n") or not content else content + "\n"
    return f"{path}\n{fence[0]}\n{body}{fence[1]}"


def _relative(path: str, cwd: str | None) -> str:
    """A canonical (absolute) path as aider's model names it: relative to the project directory."""
    if cwd and posixpath.isabs(path):
        return posixpath.relpath(posixpath.normpath(path), cwd)
    return path


@dataclass
class _Edits:
    """The files one aider request's canonical replies changed so far (an Edit after a Write sees it)."""

    cwd: str | None
    files: dict[str, str] = field(default_factory=dict)

    def current(self, path: str) -> str | None:
        if path in self.files:
            return self.files[path]
        full = path if posixpath.isabs(path) or not self.cwd else posixpath.join(self.cwd, path)
        try:
            return Path(full).read_text(encoding="utf-8")  # the fake reads what a model was shown
        except (OSError, UnicodeDecodeError):
            return None


def reply_as_aider_text(r: Reply, edits: _Edits, fence: tuple[str, str]) -> tuple[str, list[dict[str, Any]]]:
    """A canonical reply as aider's text (text blocks as they are, Write/Edit as file listings) and
    the tool_result blocks Claude Code would send back for its tool calls."""
    parts: list[str] = []
    results: list[dict[str, Any]] = []
    for block in r.content:
        if block.get("type") == "text":
            parts.append(str(block.get("text") or ""))
            continue
        if block.get("type") != "tool_use":
            continue
        name, args, use_id = block.get("name"), dict(block.get("input") or {}), block["id"]
        path = str(args.get("file_path") or "")
        if name == "Write" and path:
            content = str(args.get("content") or "")
        elif name == "Edit" and path:
            old = edits.current(path)
            if old is None or str(args.get("old_string")) not in old:
                results.append(_result(use_id, f"old_string not found in {path}", error=True))
                continue
            content = old.replace(str(args["old_string"]), str(args.get("new_string") or ""), 1)
        else:
            results.append(_result(use_id, f"aider has no {name} tool when run headless; not run", error=True))
            continue
        edits.files[path] = content
        rel = _relative(path, edits.cwd)
        parts.append(listing(rel, content, fence))
        results.append(_result(use_id, f"Sent to aider as a file listing of {rel}; aider applies it "
                                        "after this reply."))
    return "\n\n".join(p for p in parts if p), results


def _result(use_id: str, content: str, *, error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id, "content": content}
    if error:
        block["is_error"] = True
    return block


class AiderChatAdapter:
    """Answers aider's Chat Completions requests from a canonical responder (see the module doc);
    keeps the canonical bodies it asked on the coding_agent channel, oldest first."""

    def __init__(self, responder: Responder):
        self.responder = responder
        self._lock = threading.Lock()
        self._canonical: list[dict[str, Any]] = []

    @property
    def canonical_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._canonical)

    def channel(self, chat: dict[str, Any]) -> str:
        return "coding_agent" if is_aider_main(chat) else classify(as_messages_body(chat))

    def answer(self, chat: dict[str, Any], cwd: str | None) -> Reply | ApiError:
        """The reply to one aider request: its text only (aider reads edits out of the text)."""
        if not is_aider_main(chat):  # a side call (summary, commit message) or another client
            return self.responder.respond(self.channel(chat), as_messages_body(chat))
        body = canonical_body(chat, cwd)
        fence = fence_of(str(body["system"]))
        edits = _Edits(cwd)
        said: list[str] = []
        for _ in range(MAX_TOOL_ROUNDS):
            with self._lock:
                self._canonical.append(body)
            result = self.responder.respond("coding_agent", body)
            if isinstance(result, ApiError):
                return result
            blocks = [dict(b, id=b.get("id") or new_id("toolu_")) if b.get("type") == "tool_use" else b
                      for b in result.content]
            part, results = reply_as_aider_text(Reply(content=blocks, usage=result.usage), edits, fence)
            if part:
                said.append(part)
            if not results:
                break
            # What Claude Code sends after running the tools: the assistant's blocks, then results.
            body = dict(body, messages=[*body["messages"], {"role": "assistant", "content": blocks},
                                        {"role": "user", "content": results}])
        return reply(text("\n\n".join(said) + "\n"))


class FakeAiderAPI(FakeChatCompletionsAPI):
    """The fake Chat Completions API with aider's translation (AiderChatAdapter) in front of the
    responder; `requests` are aider's own bodies, `canonical_requests()` what the responder saw."""

    _name = "fake-aider-api"

    def __init__(self, responder: Responder | None = None, host: str = "127.0.0.1", port: int = 0):
        super().__init__(responder, host=host, port=port)
        self.adapter = AiderChatAdapter(self.responder)

    def canonical_requests(self) -> list[dict[str, Any]]:
        """The canonical bodies the responder was asked on the coding_agent channel, oldest first."""
        return self.adapter.canonical_requests

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        return bind(_AiderHandler, self)

    def __enter__(self) -> "FakeAiderAPI":
        return self.start()  # type: ignore[return-value]


class _AiderHandler(_Handler):
    fake: FakeAiderAPI

    def _route(self, ok: bool, record: ChatRequest) -> None:
        cwd = unquote(self.headers.get(PROJECT_DIR_HEADER) or "") or None  # percent-encoded by the agent
        if ok:
            record.channel = self.fake.adapter.channel(record.body)
        auth = self.headers.get("Authorization", "")
        if any(c and c in auth for c in self.fake.rejected_credentials):
            return self._error(record, 401, "Incorrect API key provided.", "invalid_api_key")
        if not ok:
            return self._error(record, 404, f"Not found: {self.command} {record.path} (the fake serves "
                                            "POST /v1/chat/completions)", "not_found")
        try:
            result = self.fake.adapter.answer(record.body, os.path.normpath(cwd) if cwd else None)
        except Exception as exc:  # a broken script must fail visibly, not hang aider
            return self._error(record, 500, f"The fake responder raised {type(exc).__name__}: {exc}", "server_error")
        if isinstance(result, ApiError):
            return self._error(record, result.status, result.message, result.type)
        self._send_completion(record, result)
