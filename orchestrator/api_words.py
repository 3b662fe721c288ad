"""Words model APIs and their CLIs use for one error, asked by the middle agent's providers
(agent/api_errors.py) and by the coding agents (coding_agent/api_errors.py): one list, below both."""

from __future__ import annotations

import re

__all__ = ["too_long"]

# A request longer than the model's context window (Anthropic: "prompt is too long: N tokens > M
# maximum"; OpenAI: "maximum context length is N tokens", `context_length_exceeded`; vLLM,
# llama.cpp, Ollama: "context length", "exceeds the context size"; Codex: "ran out of room in the
# model's context window"; OpenCode: ContextOverflowError).
_CONTEXT_RE = re.compile(r"context window|context[ _]length|context size|maximum context|too many tokens"
                         r"|prompt is too long|input (?:is )?too long|context_length_exceeded|ContextOverflow"
                         r"|ContextWindowExceeded", re.IGNORECASE)


def too_long(message: str) -> bool:
    """Whether an error's words say the request is longer than the model's context window."""
    return _CONTEXT_RE.search(message) is not None
