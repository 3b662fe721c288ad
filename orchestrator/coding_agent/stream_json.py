"""Parse Claude Code's `--output-format stream-json` NDJSON into progress events and turn totals."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

_MAX_EVENT_TEXT = 2000  # progress events are for display; the full text is in the result line


def parse_line(line: str | bytes) -> dict[str, Any] | None:
    """One stdout line as a JSON object, or None for blank / non-JSON lines (which do occur)."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _short(value: Any, limit: int = _MAX_EVENT_TEXT) -> str:
    text = value if isinstance(value, str) else _block_text(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return "" if content is None else str(content)


def progress_events(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Small progress dicts for one parsed line (the result line is reported by TurnStream)."""
    kind = obj.get("type")
    if kind == "system" and obj.get("subtype") == "init":
        return [{"type": "init", "session_id": obj.get("session_id"), "model": obj.get("model"),
                 "cwd": obj.get("cwd")}]
    if kind == "system" and obj.get("subtype") == "api_retry":
        return [{"type": "retry", "attempt": obj.get("attempt"), "max_retries": obj.get("max_retries"),
                 "error_status": obj.get("error_status"), "retry_delay_ms": obj.get("retry_delay_ms")}]
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    events: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if kind == "assistant" and btype == "text" and block.get("text"):
            events.append({"type": "text", "text": _short(block["text"])})
        elif kind == "assistant" and btype == "tool_use":
            events.append({"type": "tool_use", "name": block.get("name"), "input": block.get("input"),
                           "id": block.get("id")})
        elif kind == "user" and btype == "tool_result":
            events.append({"type": "tool_result", "tool_use_id": block.get("tool_use_id"),
                           "is_error": bool(block.get("is_error")), "content": _short(block.get("content"), 500)})
    return events


def permission_denials(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls Claude Code refused this turn for lack of permission (e.g. a write outside the
    project), as {"tool", "target"}; the model was told and may have worked around it."""
    out = []
    for d in result.get("permission_denials") or []:
        if not isinstance(d, dict):
            continue
        args = d.get("tool_input")
        if not isinstance(args, dict):
            args = {}
        target = args.get("file_path") or args.get("notebook_path") or args.get("command") or args.get("path")
        out.append({"tool": d.get("tool_name"), "target": _short(str(target or ""), 500)})
    return out


def turn_cost(result: dict[str, Any]) -> float:
    """This turn's cost in USD.

    On `--resume`, Claude Code 2.1.330's `total_cost_usd` is the whole session's running total,
    while `model_usage_since_last_result` holds just this process's usage (costUSD per model);
    prefer the latter so callers can add turn costs up without counting earlier turns twice.
    """
    since = result.get("model_usage_since_last_result")
    if isinstance(since, dict):
        return float(sum((m or {}).get("costUSD") or 0.0 for m in since.values() if isinstance(m, dict)))
    return float(result.get("total_cost_usd") or 0.0)


@dataclass
class TurnStream:
    """Accumulates one turn's stdout: the session id, last assistant text and the final result."""

    session_id: str | None = None
    result: dict[str, Any] | None = None
    last_text: str = ""
    lines: int = 0
    non_json: list[str] = field(default_factory=list)

    def feed(self, line: str | bytes) -> list[dict[str, Any]]:
        """Take one stdout line; return the progress events it produced."""
        self.lines += 1
        obj = parse_line(line)
        if obj is None:
            text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
            if text.strip():
                self.non_json = (self.non_json + [text.strip()[:500]])[-20:]
                return [{"type": "log", "line": text.strip()[:500]}]
            return []
        if isinstance(obj.get("session_id"), str):
            self.session_id = obj["session_id"]
        if obj.get("type") == "result":
            self.result = obj  # the last one wins if a version ever prints several
            return [self.result_event()]
        events = progress_events(obj)
        texts = [e["text"] for e in events if e["type"] == "text"]
        if texts:
            self.last_text = texts[-1]
        return events

    def result_event(self) -> dict[str, Any]:
        r = self.result or {}
        return {"type": "result", "subtype": r.get("subtype"), "is_error": bool(r.get("is_error")),
                "session_id": r.get("session_id"),
                "cost_usd": turn_cost(r), "session_cost_usd": float(r.get("total_cost_usd") or 0.0),
                "num_turns": r.get("num_turns"), "duration_ms": r.get("duration_ms"),
                "terminal_reason": r.get("terminal_reason"), "text": _short(r.get("result") or ""),
                "permission_denials": permission_denials(r)}
