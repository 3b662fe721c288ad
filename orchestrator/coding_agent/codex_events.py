"""Parse `codex exec --json` (Codex CLI 0.171) JSONL into our progress events and the turn's totals.

Codex's lines: `thread.started {thread_id}`, `turn.started`, `item.started` / `item.updated` /
`item.completed {item}` (item types agent_message, reasoning, command_execution, file_change,
mcp_tool_call, web_search, todo_list, error), `turn.completed {usage}`, `turn.failed {error}` and
`error {message}`. They become the event shapes Claude Code's stream produces (stream_json.py),
which the progress views read: `text`, `tool_use` {name, input, id} with Claude Code's tool names
where one fits (a command is `Bash`, an added file `Write`, a changed one `Edit`), `tool_result`,
`log`, and a final `result`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .stream_json import parse_line

_MAX_EVENT_TEXT = 2000
_FILE_TOOLS = {"add": "Write", "update": "Edit", "delete": "Delete"}


def _short(text: Any, limit: int = _MAX_EVENT_TEXT) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + "..."


def _readable(message: Any) -> tuple[str, int | None]:
    """A failure's message and the HTTP status it shows. Codex 0.171 words every status as
    "unexpected status 403 Forbidden: ..." except a 400, which it passes on as the response body
    alone (`{"error": {"message": ..., "type": "invalid_request_error", ...}}`, its InvalidRequest):
    that body's message, and 400, so the turn still says which status failed it."""
    text = str(message)
    try:
        body = json.loads(text)
    except ValueError:
        return text, None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return text, None
    return str(error.get("message") or text), 400


@dataclass
class CodexStream:
    """Accumulates one turn's stdout: the thread id, the agent's last message, usage, the failure."""

    session_id: str | None = None  # ours, put in the events
    thread_id: str | None = None  # Codex's, from thread.started
    last_text: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    completed: bool = False  # turn.completed came
    failure: str | None = None  # turn.failed's or the last error line's message
    failure_status: int | None = None  # the HTTP status the failure's raw body shows (400), if any
    ended: bool = False  # turn.failed came, or an error that is not a notice of a retry Codex makes
    tool_calls: int = 0
    non_json: list[str] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        """Whether the turn is over as far as Codex's stream says: completed, failed, or an error
        that is not a retry Codex is making ("Reconnecting... 2/5 (429 ...)": it may still
        complete, so it is not ended 5 s after the notice, as a lingering process is)."""
        return self.completed or self.ended

    def feed(self, line: str | bytes) -> list[dict[str, Any]]:
        """Take one stdout line; return the progress events it produced."""
        obj = parse_line(line)
        if obj is None:
            text = (line.decode("utf-8", "replace") if isinstance(line, bytes) else line).strip()
            if text:
                self.non_json = (self.non_json + [text[:500]])[-20:]
                return [{"type": "log", "line": text[:500]}]
            return []
        kind = obj.get("type")
        if kind == "thread.started":
            self.thread_id = str(obj.get("thread_id") or "") or None
            return [{"type": "init", "session_id": self.session_id, "thread_id": self.thread_id}]
        if kind == "turn.completed":
            self.completed = True
            usage = obj.get("usage")
            self.usage = dict(usage) if isinstance(usage, dict) else {}
            return []
        if kind == "turn.failed":
            error = obj.get("error")
            self.failure, status = _readable(error.get("message") if isinstance(error, dict) else
                                             error or "the turn failed")
            self.failure_status = status or self.failure_status
            self.ended = True
            return [{"type": "log", "line": _short(self.failure, 500)}]
        if kind == "error":
            message = str(obj.get("message") or "error")
            self.failure, status = _readable(message)
            self.failure_status = status or self.failure_status
            self.ended = self.ended or not _retrying(message)
            return [{"type": "log", "line": _short(self.failure, 500)}]
        item = obj.get("item")
        if kind in ("item.started", "item.completed") and isinstance(item, dict):
            return self._item(item, done=kind == "item.completed")
        return []

    def _item(self, item: dict[str, Any], *, done: bool) -> list[dict[str, Any]]:
        itype, ident = item.get("type"), str(item.get("id") or "")
        if itype == "agent_message" and done:
            self.last_text = str(item.get("text") or "")
            return [{"type": "text", "text": _short(self.last_text)}] if self.last_text else []
        if itype == "command_execution":
            if not done:
                self.tool_calls += 1
                return [{"type": "tool_use", "name": "Bash", "input": {"command": item.get("command")}, "id": ident}]
            code = item.get("exit_code")
            return [{"type": "tool_result", "tool_use_id": ident, "is_error": code not in (0, None)
                     or item.get("status") == "failed", "content": _short(item.get("aggregated_output"), 500)}]
        if itype == "file_change":
            changes = [c for c in item.get("changes") or [] if isinstance(c, dict)]
            if not done:
                self.tool_calls += 1
                return [{"type": "tool_use", "name": _FILE_TOOLS.get(str(c.get("kind")), "apply_patch"),
                         "input": {"file_path": c.get("path")}, "id": ident} for c in changes]
            failed = item.get("status") != "completed"
            return [{"type": "tool_result", "tool_use_id": ident, "is_error": failed,
                     "content": ", ".join(f"{c.get('kind')} {c.get('path')}" for c in changes)}]
        if itype == "mcp_tool_call" and not done:
            self.tool_calls += 1
            return [{"type": "tool_use", "name": f"{item.get('server')}.{item.get('tool')}",
                     "input": item.get("arguments") if isinstance(item.get("arguments"), dict) else {}, "id": ident}]
        if itype == "error" and done:  # a warning Codex shows and goes on (e.g. unknown model metadata)
            return [{"type": "log", "line": _short(item.get("message"), 500)}]
        return []

    def result_event(self, is_error: bool, duration_ms: int, cost_usd: float = 0.0) -> dict[str, Any]:
        return {"type": "result", "subtype": "error" if is_error else "success", "is_error": is_error,
                "session_id": self.session_id, "thread_id": self.thread_id, "cost_usd": cost_usd,
                "num_turns": 1, "duration_ms": duration_ms, "text": _short(self.last_text),
                "usage": self.usage, "permission_denials": []}


def _retrying(message: str) -> bool:
    """Whether an `error` event is Codex's notice of a retry it is making ("Reconnecting... 1/5
    (...)"), after which the turn may still complete; not "Reconnecting... waiting for network",
    where Codex waits for ever (nothing answers at its base URL): that one ends the turn."""
    said = message.strip().lower()
    return said.startswith("reconnecting") and "waiting for network" not in said
