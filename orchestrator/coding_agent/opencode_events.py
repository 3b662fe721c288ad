"""Parse `opencode run --format json` lines into our progress events and the turn's totals.

OpenCode 1.18.33 prints one JSON object a line, each with `type`, `timestamp`, `sessionID` and a
`part` (its message part): `step_start`; `text` (part.text); `reasoning`; `tool_use` (part.tool,
part.callID, part.state {status "completed"|"error", input, output | error}), printed once the
tool has run; `step_finish` (part.reason "tool-calls" | "stop", part.tokens {input, output,
reasoning, cache {read, write}}, part.cost in USD); and `error` ({error: {name, data: {message,
statusCode}}}) when the turn failed, e.g. the model API refused it. Each step (one model call) is
its own assistant message (part.messageID). Tool inputs use OpenCode's camelCase names (filePath);
the events we emit carry them as Claude Code's (file_path), which is what the progress views read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OpenCodeStream", "snake_keys"]

_MAX_EVENT_TEXT = 2000
# What OpenCode's tool error says when a permission rule refused the call (1.18.33), or a person
# (nobody, here) rejected it.
_DENIED = ("prevents you from using this specific tool call", "rejected permission")


def _short(text: Any, limit: int = _MAX_EVENT_TEXT) -> str:
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def snake_keys(args: Any) -> dict[str, Any]:
    """{"filePath": ..} as {"file_path": ..}: tool inputs in the names our progress views read."""
    if not isinstance(args, dict):
        return {}
    return {re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", str(k)).lower(): v for k, v in args.items()}


@dataclass
class OpenCodeStream:
    """Accumulates one turn's stdout: OpenCode's session id, texts per message, totals, the error."""

    session_id: str | None = None  # OpenCode's own (ses_...)
    texts: dict[str, list[str]] = field(default_factory=dict)  # messageID -> its text parts, in order
    last_message: str | None = None  # the latest message that had text
    steps: int = 0
    finished: bool = False  # a step ended with reason "stop": the answer is complete
    cost_usd: float = 0.0
    tokens: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0,
                                                            "reasoning_tokens": 0, "cache_read_input_tokens": 0,
                                                            "cache_creation_input_tokens": 0})
    error: dict[str, Any] | None = None  # the `error` line's error object
    permission_denials: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The final answer: the text of the last message that had any."""
        return "".join(self.texts.get(self.last_message or "", []))

    @property
    def answered(self) -> bool:
        return self.finished or self.error is not None

    def feed(self, line: str | bytes) -> list[dict[str, Any]]:
        """Take one stdout line; return the progress events it produced."""
        raw = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        raw = raw.strip()
        try:
            obj = json.loads(raw) if raw.startswith("{") else None
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            return [{"type": "log", "line": raw[:500]}] if raw else []
        events: list[dict[str, Any]] = []
        if self.session_id is None and isinstance(obj.get("sessionID"), str):
            self.session_id = obj["sessionID"]
            events.append({"type": "init", "session_id": self.session_id})
        kind, part = obj.get("type"), _dict(obj.get("part"))
        if kind == "text" and isinstance(part.get("text"), str):
            message = str(part.get("messageID") or "")
            self.texts.setdefault(message, []).append(part["text"])
            self.last_message = message
            if part["text"].strip():
                events.append({"type": "text", "text": _short(part["text"])})
        elif kind == "tool_use":
            events += self._tool(part)
        elif kind == "step_finish":
            self._step(part)
        elif kind == "error":
            error = obj.get("error")
            self.error = error if isinstance(error, dict) else {"name": "Error", "data": {"message": str(error)}}
        return events

    def _tool(self, part: dict[str, Any]) -> list[dict[str, Any]]:
        state = _dict(part.get("state"))
        name, call = part.get("tool"), part.get("callID")
        args = snake_keys(state.get("input"))
        failed = state.get("status") == "error"
        output = state.get("error") if failed else state.get("output")
        if failed and any(d in str(output) for d in _DENIED):
            target = args.get("file_path") or args.get("command") or args.get("path") or args.get("url") or ""
            self.permission_denials.append({"tool": name, "target": _short(str(target), 500)})
        return [{"type": "tool_use", "name": name, "input": args, "id": call},
                {"type": "tool_result", "tool_use_id": call, "is_error": failed, "content": _short(output or "", 500)}]

    def _step(self, part: dict[str, Any]) -> None:
        self.steps += 1
        if part.get("reason") not in ("tool-calls", "tool_calls"):
            self.finished = True
        try:
            self.cost_usd += float(part.get("cost") or 0.0)
        except (TypeError, ValueError):
            pass
        tokens = _dict(part.get("tokens"))
        cache = _dict(tokens.get("cache"))
        for ours, value in (("input_tokens", tokens.get("input")), ("output_tokens", tokens.get("output")),
                            ("reasoning_tokens", tokens.get("reasoning")),
                            ("cache_read_input_tokens", cache.get("read")),
                            ("cache_creation_input_tokens", cache.get("write"))):
            if isinstance(value, (int, float)):
                self.tokens[ours] += int(value)

    def priced_usage(self) -> dict[str, int]:
        """The tokens as pricing.turn_cost reads them (input including cached, cached apart; reasoning
        as output). OpenCode's `input` leaves the cache reads out for most providers and its
        `output` may or may not hold the reasoning: the parts are added, so a turn priced from them
        counts more, never less."""
        t = self.tokens
        read = t["cache_read_input_tokens"]
        return {"input_tokens": t["input_tokens"] + read + t["cache_creation_input_tokens"],
                "cached_input_tokens": read, "output_tokens": t["output_tokens"] + t["reasoning_tokens"]}

    @property
    def api_error_status(self) -> int | None:
        status = _dict(_dict(self.error).get("data")).get("statusCode")
        return status if isinstance(status, int) else None

    def error_message(self) -> str:
        """The `error` line in a few words: its message (and name when it says more)."""
        error = _dict(self.error)
        data = _dict(error.get("data"))
        message = str(data.get("message") or error.get("message") or "no details").strip()
        name = str(error.get("name") or "")
        return message if not name or name in ("APIError", "UnknownError") else f"{name}: {message}"
