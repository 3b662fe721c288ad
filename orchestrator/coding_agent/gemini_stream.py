"""Parse Gemini CLI's `--output-format stream-json` JSONL into our progress events and turn totals.

Gemini CLI 0.61.0 prints one JSON object a line: `init` {session_id, model}; `message` {role,
content, delta} (the assistant's text comes in delta chunks); `tool_use` {tool_name, tool_id,
parameters}; `tool_result` {tool_id, status "success"|"error", output, error}; `error` {severity,
message} (a warning or a non-fatal error); and last `result` {status "success"|"error", error
{type, message}, stats {input_tokens, output_tokens, cached, total_tokens, duration_ms,
tool_calls, models}}. It reports no cost. The events we emit have the shapes Claude Code's stream
produces (stream_json.progress_events): init, text, tool_use, tool_result, result, log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .stream_json import parse_line

_MAX_EVENT_TEXT = 2000
_API_STATUS_RE = re.compile(r'"code"\s*:\s*(\d{3})|\bstatus(?:\s*code)?\W{0,3}(\d{3})\b', re.I)


def _short(text: Any, limit: int = _MAX_EVENT_TEXT) -> str:
    text = text if isinstance(text, str) else ("" if text is None else str(text))
    return text if len(text) <= limit else text[:limit] + "..."


def as_dict(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else {} (the stream is parsed, not trusted)."""
    return value if isinstance(value, dict) else {}


def usage_of(stats: Any) -> dict[str, int]:
    """The turn's token counts, named as Claude Code's usage (`cached` is input read from cache)."""
    if not isinstance(stats, dict):
        return {}
    out = {"input_tokens": stats.get("input_tokens"), "output_tokens": stats.get("output_tokens"),
           "cache_read_input_tokens": stats.get("cached"), "total_tokens": stats.get("total_tokens")}
    return {k: int(v) for k, v in out.items() if isinstance(v, (int, float))}


def api_status(message: str) -> int | None:
    """The model API's HTTP status in the CLI's error text ("[API Error: {"error":{"code":500,...")."""
    match = _API_STATUS_RE.search(message or "")
    if not match:
        return None
    return int(match.group(1) or match.group(2))


@dataclass
class GeminiStream:
    """Accumulates one turn's stdout: the session id, the answer's text and the final result."""

    session_id: str | None = None
    model: str | None = None
    result: dict[str, Any] | None = None
    text: str = ""  # the assistant's text since its last tool call: the turn's answer
    warnings: list[str] = field(default_factory=list)
    denials: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: int = 0
    responses: int = 0  # model responses seen (text or tool calls after the prompt or a tool result)
    _answering: bool = False
    _pending: str = ""  # delta text not yet emitted as a "text" event
    _tools: dict[str, dict[str, Any]] = field(default_factory=dict)

    def feed(self, line: str | bytes) -> list[dict[str, Any]]:
        """Take one stdout line; return the progress events it produced."""
        obj = parse_line(line)
        if obj is None:
            raw = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
            return [{"type": "log", "line": raw.strip()[:500]}] if raw.strip() else []
        kind = obj.get("type")
        speaks = kind == "tool_use" or (kind == "message" and obj.get("role") == "assistant")
        if speaks and not self._answering:
            self.responses += 1
        self._answering = speaks
        if kind == "message" and obj.get("role") == "assistant":
            content = obj.get("content")
            chunk = content if isinstance(content, str) else ""
            if not obj.get("delta"):
                self._pending = ""  # a whole message replaces what its deltas said
            self._pending += chunk
            self.text += chunk
            return []
        events = self._flush()
        if kind == "init":
            self.session_id = obj.get("session_id") or self.session_id
            self.model = obj.get("model")
            events.append({"type": "init", "session_id": self.session_id, "model": self.model, "cwd": None})
        elif kind == "tool_use":
            self.tool_calls += 1
            self.text = ""  # the answer is what it says after its last tool call
            ident = str(obj.get("tool_id") or "")
            params = as_dict(obj.get("parameters"))
            self._tools[ident] = {"name": obj.get("tool_name"), "input": params}
            events.append({"type": "tool_use", "name": obj.get("tool_name"), "input": params, "id": ident})
        elif kind == "tool_result":
            ident = str(obj.get("tool_id") or "")
            failed = obj.get("status") == "error"
            error = as_dict(obj.get("error"))
            output = obj.get("output") or error.get("message") or ""
            if failed and _refused(error, output):
                use = self._tools.get(ident, {})
                args = use.get("input") or {}
                target = args.get("file_path") or args.get("command") or args.get("dir_path") or ""
                self.denials.append({"tool": use.get("name"), "target": _short(str(target), 500)})
            events.append({"type": "tool_result", "tool_use_id": ident, "is_error": failed,
                           "content": _short(output, 500)})
        elif kind == "error":
            message = str(obj.get("message") or "")
            self.warnings = (self.warnings + [message[:500]])[-20:]
            events.append({"type": "log", "line": f"Gemini CLI {obj.get('severity') or 'error'}: {message[:500]}"})
        elif kind == "result":
            self.result = obj
            events.append(self.result_event())
        return events

    def _flush(self) -> list[dict[str, Any]]:
        if not self._pending.strip():
            self._pending = ""
            return []
        text, self._pending = self._pending, ""
        return [{"type": "text", "text": _short(text)}]

    def finish(self) -> list[dict[str, Any]]:
        """Events still held when the output ends (text with no result after it)."""
        return self._flush()

    @property
    def error_message(self) -> str:
        r = self.result or {}
        error = r.get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error.get("type") or "")
        return str(error or "")

    def result_event(self) -> dict[str, Any]:
        r = self.result or {}
        stats = as_dict(r.get("stats"))
        return {"type": "result", "subtype": r.get("status"), "is_error": r.get("status") != "success",
                "session_id": self.session_id, "cost_usd": 0.0, "session_cost_usd": 0.0,
                "num_turns": self.responses, "duration_ms": stats.get("duration_ms"),
                "terminal_reason": None, "text": _short(self.text), "usage": usage_of(stats),
                "permission_denials": list(self.denials)}


def _refused(error: dict[str, Any], output: str) -> bool:
    """Whether a failed tool call was refused for where it acts (outside the workspace) or for
    lack of approval, rather than failing at its work."""
    text = f"{error.get('type', '')} {error.get('message', '')} {output}".lower()
    return any(s in text for s in ("not in workspace", "outside the allowed workspace", "not allowed",
                                   "denied", "tool_not_registered", "requires approval"))
