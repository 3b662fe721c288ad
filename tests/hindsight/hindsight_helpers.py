"""Helpers for the hindsight tests: times, a recording fake LLM, fact replies."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Callable


def ts(day: str) -> float:
    """'2023-05-08' as unix seconds (UTC midday)."""
    return datetime.fromisoformat(day).replace(hour=12, tzinfo=timezone.utc).timestamp()


class RecordingLLM:
    """A TextLLM that answers from a script (strings, or callables of the prompt) and records
    every (system, prompt) it received; an exhausted script raises."""

    def __init__(self, replies: list[str | Callable[[str, str], str]] | None = None):
        self.replies = list(replies or [])
        self.calls: list[tuple[str, str]] = []

    def complete(self, system: str, prompt: str, max_tokens: int = 1024) -> str:
        self.calls.append((system, prompt))
        if not self.replies:
            raise RuntimeError("the fake LLM has no reply scripted for this call")
        reply = self.replies.pop(0)
        return reply(system, prompt) if callable(reply) else reply


def facts_reply(*facts: dict) -> str:
    return json.dumps({"facts": list(facts)})
