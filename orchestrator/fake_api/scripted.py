"""ScriptedResponder: FIFO queues of replies per channel, for tests that script a whole run."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from .replies import ApiError, Reply, ReplyLike, api_error, reply, resolve, text

CHANNELS = ("agent", "coding_agent", "aux")


class ScriptedResponder:
    """Answers each channel from its own queue, in order.

    When a queue runs dry: the coding agent gets a plain "Done." (so Claude Code ends its turn), aux
    gets a short text, and the agent gets an HTTP 500 saying the script is exhausted, because a
    middle agent that runs past its script is a test bug that must fail visibly.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, deque[ReplyLike]] = {c: deque() for c in CHANNELS}

    def push(self, channel: str, *replies: ReplyLike) -> "ScriptedResponder":
        if channel not in self._queues:
            raise ValueError(f"unknown channel {channel!r}; use one of {', '.join(CHANNELS)}")
        with self._lock:
            self._queues[channel].extend(replies)
        return self

    def agent(self, *replies: ReplyLike) -> "ScriptedResponder":
        return self.push("agent", *replies)

    def coding_agent(self, *replies: ReplyLike) -> "ScriptedResponder":
        return self.push("coding_agent", *replies)

    def aux(self, *replies: ReplyLike) -> "ScriptedResponder":
        return self.push("aux", *replies)

    def pending(self, channel: str) -> int:
        with self._lock:
            return len(self._queues[channel])

    def clear(self, channel: str | None = None) -> None:
        """Drop unanswered replies (of one channel, or all)."""
        with self._lock:
            for name, queue in self._queues.items():
                if channel in (None, name):
                    queue.clear()

    def respond(self, channel: str, body: dict[str, Any]) -> Reply | ApiError:
        with self._lock:
            queue = self._queues.get(channel)
            item = queue.popleft() if queue else None
        if item is not None:
            return resolve(item, body)  # outside the lock: a callable may be slow on purpose
        if channel == "coding_agent":
            return reply(text("Done."))
        if channel == "aux":
            return reply(text("Fake reply."))
        return api_error(500, "The fake Messages API's agent script is exhausted: the middle agent made "
                              "more LLM calls than the test scripted. Add replies with script.agent(...).")
