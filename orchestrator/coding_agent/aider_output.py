"""Read one aider turn: its stdout (`--no-pretty`) as progress events, tokens, cost and edits; its
LLM history file (`--llm-history-file`) for the model's replies word for word.

What aider 0.86.2 prints, one model exchange after another (checked against it):
- a banner ("Aider v0.86.2", "Model: ...", "Git repo: ...", "Repo-map: ...", "Restored previous
  conversation history.") and a blank line;
- the model's reply, re-rendered (blank lines doubled around file listings: the history file has
  it as sent);
- "Tokens: 705 sent, 12 received. Cost: $0.0023 message, $0.0023 session." (counts of 1000 and
  more as "1.2k"; "N cache write, N cache hit" when the API reports them, the Cost part on a line of
  its own then, and no Cost part for a model without prices);
- what it did with the reply: "Applied edit to PATH", a refusal by middle's launcher, "The LLM did
  not conform to the edit format." (then a retry: another exchange);
- a model API error as "litellm.AuthenticationError: ..." (no Tokens line; aider still exits 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .aider_launch import REFUSED

__all__ = ["AiderOutput", "API_ERROR_STATUS", "replies_since"]

_TOKENS_RE = re.compile(r"^Tokens: (?P<sent>[\d.]+k?) sent(?:, (?P<write>[\d.]+k?) cache write)?"
                        r"(?:, (?P<hit>[\d.]+k?) cache hit)?, (?P<received>[\d.]+k?) received\.")
_COST_RE = re.compile(r"Cost: \$(?P<cost>[\d.]+) message, \$[\d.]+ session\.")
_APPLIED_RE = re.compile(r"^Applied edit to (?P<path>.+?)\s*$")
_REFUSED_RE = re.compile(rf"^{re.escape(REFUSED)} (?P<path>.+?): it is outside the project")
_MODEL_RE = re.compile(r"^(?:Main )?[Mm]odel: (?P<model>\S+)")
_API_ERROR_RE = re.compile(r"^litellm\.(?P<name>\w+):\s*(?P<message>.*)$")
_BANNER = ("Aider v", "Main model:", "Model:", "Weak model:", "Editor model:", "Git repo:", "Repo-map:",
           "Restored previous conversation history.", "Added ", "Warning: ")
_HEADER_RE = re.compile(r"^(TO LLM|LLM RESPONSE) \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")
_MAX_EVENT_TEXT = 2000

# litellm's exception names (what aider prints) to the HTTP status the API answered.
API_ERROR_STATUS = {
    "BadRequestError": 400, "ContextWindowExceededError": 400, "ContentPolicyViolationError": 400,
    "UnsupportedParamsError": 400, "AuthenticationError": 401, "PermissionDeniedError": 403,
    "NotFoundError": 404, "UnprocessableEntityError": 422, "RateLimitError": 429,
    "InternalServerError": 500, "ServiceUnavailableError": 503, "APIConnectionError": None,
    "Timeout": None, "APIError": None,
}


def _count(value: str | None) -> int:
    if not value:
        return 0
    return round(float(value[:-1]) * 1000) if value.endswith("k") else int(float(value))


@dataclass
class AiderOutput:
    """Accumulates one turn's stdout; `feed` returns the progress events a line produced, in the
    shapes Claude Code's stream gives (text, tool_use, log)."""

    cwd: Path
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    cost_usd: float = 0.0  # what aider reported: $0 for a model it has no price for
    model: str | None = None  # the model aider says it runs (an alias such as "sonnet" resolved)
    exchanges: int = 0  # model replies (one Tokens line each)
    applied: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    api_error: tuple[str, str] | None = None  # (litellm exception name, message)
    _in_banner: bool = True
    _aider_seen: bool = False
    _map_seen: bool = False
    _text: list[str] = field(default_factory=list)
    _tail: list[str] = field(default_factory=list)

    def feed(self, raw: str | bytes) -> list[dict[str, Any]]:
        line = (raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw).rstrip("\r\n")
        stripped = line.strip()
        if stripped:
            self._tail = (self._tail + [stripped[:500]])[-20:]
        if self._in_banner:  # the banner ends at the blank line after its "Repo-map:" line
            if not stripped:
                self._in_banner = not self._map_seen
                return []
            self._map_seen = self._map_seen or stripped.startswith("Repo-map:")
            model = _MODEL_RE.match(stripped)
            if model and self.model is None:
                self.model = model["model"]
            if not self._aider_seen or stripped.startswith(_BANNER):
                self._aider_seen = self._aider_seen or stripped.startswith("Aider v")
                return [{"type": "log", "line": stripped}]
            self._in_banner = False  # no Repo-map line (no git?): this line is the reply's
        tokens = _TOKENS_RE.match(stripped)
        if tokens:
            self.exchanges += 1
            self.api_error = None  # an error aider retried has been answered after all
            self.usage["input_tokens"] += _count(tokens["sent"])
            self.usage["output_tokens"] += _count(tokens["received"])
            for key, group in (("cache_creation_input_tokens", "write"), ("cache_read_input_tokens", "hit")):
                if tokens[group]:
                    self.usage[key] = self.usage.get(key, 0) + _count(tokens[group])
            events = self._flush_text()
            cost = _COST_RE.search(stripped)
            if cost:
                self.cost_usd += float(cost["cost"])
            return events + [{"type": "log", "line": stripped}]
        cost = _COST_RE.match(stripped)
        if cost:  # on a line of its own after a Tokens line with cache counts
            self.cost_usd += float(cost["cost"])
            return [{"type": "log", "line": stripped}]
        applied = _APPLIED_RE.match(stripped)
        if applied:
            path = applied["path"]
            self.applied.append(path)
            return self._flush_text() + [{"type": "tool_use", "name": "Edit", "id": f"aider-edit-{len(self.applied)}",
                                          "input": {"file_path": str(self.cwd / path)}}]
        refused = _REFUSED_RE.match(stripped)
        if refused:
            self.refused.append(refused["path"])
            return self._flush_text() + [{"type": "log", "line": stripped}]
        error = _API_ERROR_RE.match(stripped)
        if error:
            self.api_error = (error["name"], error["message"])
            return self._flush_text() + [{"type": "log", "line": stripped}]
        if self.exchanges == 0:  # the model's first reply, until its Tokens line
            self._text.append(line)
            return []
        return [{"type": "log", "line": stripped}] if stripped else []

    def priced_usage(self) -> dict[str, int]:
        """The tokens as pricing.turn_cost reads them (input including cached, cached apart). aider's
        "sent" leaves out the cache counts for some providers (Anthropic) and includes them for
        others: they are added here, so a turn priced from them counts more, never less."""
        hit = self.usage.get("cache_read_input_tokens", 0)
        sent = self.usage["input_tokens"] + self.usage.get("cache_creation_input_tokens", 0) + hit
        return {"input_tokens": sent, "cached_input_tokens": hit, "output_tokens": self.usage["output_tokens"]}

    def finish(self) -> list[dict[str, Any]]:
        """The events still held back when stdout ends."""
        return self._flush_text()

    def tail(self) -> str:
        """The last lines aider printed, for an error message."""
        return " / ".join(self._tail[-5:])

    def _flush_text(self) -> list[dict[str, Any]]:
        text = re.sub(r"\n{3,}", "\n\n", "\n".join(self._text)).strip()
        self._text = []
        if not text:
            return []
        return [{"type": "text", "text": text if len(text) <= _MAX_EVENT_TEXT else text[:_MAX_EVENT_TEXT] + "..."}]


def replies_since(llm_history: Path, offset: int) -> list[str]:
    """The model's replies aider logged in its LLM history file after byte `offset` (where this turn
    began), each exactly as the model sent it."""
    try:
        with open(llm_history, "rb") as f:
            f.seek(offset)
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    replies: list[str] = []
    current: list[str] | None = None
    for line in data.splitlines():
        if _HEADER_RE.match(line):
            if current is not None:
                replies.append("\n".join(current))
            current = [] if line.startswith("LLM RESPONSE") else None
        elif current is not None and line.startswith("ASSISTANT"):
            current.append(line[len("ASSISTANT "):])
    if current is not None:
        replies.append("\n".join(current))
    return [r.strip() for r in replies if r.strip()]
