"""Honest fakes for graph tests: a scripted middle-agent LLM and a recording worker."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from orchestrator.coding_agent.base import EventCallback, TurnResult


def plan_reply(prompt: str) -> str:
    return json.dumps({"prompt": prompt})


def decision_reply(complete: bool, summary: str = "", next_prompt: str = "") -> str:
    return json.dumps({"complete": complete, "summary": summary, "next_prompt": next_prompt})


class ScriptedAgentLLM:
    """Answers the middle agent's requests from a list, recording every request it received."""

    def __init__(self, replies: Sequence[str | Callable[[str, list[dict[str, str]]], str]]):
        self.replies = list(replies)
        self.calls: list[dict[str, Any]] = []

    def complete(self, system: str, messages: list[dict[str, str]], schema: Any) -> str:
        self.calls.append({"system": system, "messages": [dict(m) for m in messages],
                           "schema": getattr(schema, "__name__", str(schema))})
        if not self.replies:
            raise AssertionError(f"ScriptedAgentLLM has no reply left for request {len(self.calls)}")
        reply = self.replies.pop(0)
        return reply(system, messages) if callable(reply) else reply

    @property
    def user_messages(self) -> list[str]:
        """The first user message of each request (what the agent saw)."""
        return [c["messages"][0]["content"] for c in self.calls]


class PerTicketAgentLLM:
    """Answers each ticket's requests from that ticket's own script, whatever order parallel
    tickets ask in. A request belongs to the ticket whose `Ticket: {title}` line it carries."""

    def __init__(self, scripts: dict[str, list[str]]):
        self.scripts = {title: list(replies) for title, replies in scripts.items()}
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def complete(self, system: str, messages: list[dict[str, str]], schema: Any) -> str:
        text = messages[0]["content"]
        with self._lock:
            title = next((t for t in self.scripts if f"Ticket: {t}\n" in text), None)
            self.calls.append({"title": title, "messages": [dict(m) for m in messages],
                               "schema": getattr(schema, "__name__", str(schema))})
            if title is None or not self.scripts[title]:
                raise AssertionError(f"PerTicketAgentLLM has no reply for this request: {text[:200]!r}")
            return self.scripts[title].pop(0)


class RecordingCodingAgent:
    """A worker that records each turn it is asked to run and replies from a script.

    Each scripted item is a response text, a TurnResult, or a callable(prompt, cwd) -> either;
    a callable may write files into cwd, as a coding agent would.
    """

    kind = "recording"

    def __init__(self, script: list[Any] | None = None, cost_per_turn: float = 0.01):
        self.script = list(script or [])
        self.cost_per_turn = cost_per_turn
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def run_turn(self, prompt: str, cwd: Path, *, session_id: str | None, resume: bool,
                 on_event: EventCallback | None = None) -> TurnResult:
        with self._lock:
            self.calls.append({"prompt": prompt, "cwd": str(cwd), "session_id": session_id,
                               "resume": resume})
            item = self.script.pop(0) if self.script else "Done."
        if callable(item):
            item = item(prompt, Path(cwd))
        if isinstance(item, TurnResult):
            return item
        if on_event:
            on_event({"type": "text", "text": str(item)})
        return TurnResult(session_id=session_id, text=str(item), cost_usd=self.cost_per_turn,
                          num_turns=1, duration_ms=5)

    @property
    def prompts(self) -> list[str]:
        return [c["prompt"] for c in self.calls]
