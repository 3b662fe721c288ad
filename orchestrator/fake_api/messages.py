"""Read text out of Messages API request bodies (system prompt, messages, tool results)."""

from __future__ import annotations

import re
from typing import Any

from orchestrator.agent.prompts import MIDDLE_AGENT_MARKER  # the one wording, read from the prompts

__all__ = ["classify", "content_text", "last_message", "last_user_text",
           "system_text", "working_directory"]

# Claude Code 2.1.330 states its cwd in a `role: "system"` message ("# Environment ...
# - Primary working directory: /abs/path"); older versions put it in the system prompt
# ("Working directory: /abs/path"). Both forms are searched everywhere in the body.
_CWD_RE = re.compile(r"^\s*-?\s*(?:Primary working directory|Working directory):\s*(/\S[^\n]*?)\s*$", re.M)


def content_text(content: Any) -> str:
    """The text of a string or a list of blocks (text blocks and tool_result contents)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            parts.append(content_text(block.get("content")))
    return "\n".join(parts)


def system_text(body: dict[str, Any]) -> str:
    return content_text(body.get("system"))


def last_message(body: dict[str, Any], role: str = "user") -> dict[str, Any] | None:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == role:
            return message
    return None


def last_user_text(body: dict[str, Any]) -> str:
    message = last_message(body, "user")
    return content_text(message.get("content")) if message else ""


def classify(body: dict[str, Any]) -> str:
    """'agent' (the middle agent's own LLM), 'coding_agent' (Claude Code's main loop: it sends tools)
    or 'aux' (Claude Code side calls without tools, such as title generation)."""
    if MIDDLE_AGENT_MARKER in system_text(body):
        return "agent"
    if body.get("tools"):
        return "coding_agent"
    return "aux"


def working_directory(body: dict[str, Any]) -> str | None:
    """The absolute working directory Claude Code announced in this request, if any."""
    texts = [system_text(body)] + [content_text(m.get("content")) for m in body.get("messages") or []]
    for chunk in texts:
        match = _CWD_RE.search(chunk)
        if match:
            return match.group(1)
    return None
