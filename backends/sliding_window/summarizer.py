"""Incremental window summaries: an LLM prompt when there is a model, else an extract."""

from __future__ import annotations

import logging
import re
from typing import Any

from orchestrator.plugin_api import TextLLM

log = logging.getLogger("middle.memory.sliding_window")

# A single message in the LLM prompt is cut to this size: a 1 MB doc must not blow the model's
# context, and the first few thousand characters carry what a summary would keep anyway.
MAX_MESSAGE_CHARS_IN_PROMPT = 8000
# Each extractive line keeps at most this much of its message's first sentence.
MAX_SENTENCE_CHARS = 240

_SYSTEMS = {
    "conversation": (
        "You maintain the rolling memory of a ticket conversation between a middle agent "
        "(its prompts) and a coding agent (its responses). Keep what the middle agent needs to "
        "steer the next turn: goals, decisions, files touched, errors met and how they were "
        "resolved, and what is still open. Write plain prose or short bullets, no preamble."
    ),
    "project": (
        "You maintain the rolling memory of a software project, built from summaries of "
        "completed tickets. Keep what a developer starting the next ticket should recall: what "
        "was done, what was learned, what went wrong and how it was overcome. Name each doc by its [id]; a doc marked "
        "superseded by another is history: state the newer one as what holds. Write plain prose "
        "or short bullets, no preamble."
    ),
}

_SENTENCE_END = re.compile(r"(.+?[.!?。！？])(?:\s|$)")


def label(msg: dict[str, Any]) -> str:
    """How a message is named in a summary: `[seq role]`, or a project doc's `[id]` (the id
    `middle memory show` takes) with what people said of it (`superseded by [id]`, pinned)."""
    if msg.get("label"):
        return f"[{msg['label']}]"
    return f"[{msg['seq']} {msg['role']}]"


def format_message(msg: dict[str, Any], limit: int | None = None) -> str:
    """One message as `[seq role] text` (see label), optionally cut to limit characters."""
    text = msg["text"]
    if limit is not None and len(text) > limit:
        text = text[:limit] + " […truncated]"
    return f"{label(msg)} {text}"


def build_prompt(
    previous: str | None,
    previous_end: int | None,
    new_messages: list[dict[str, Any]],
    window_start: int,
    max_chars: int,
) -> str:
    """The user prompt of one incremental summary step (the summarizing memory agent)."""
    parts = [
        f"Sliding window: the summary must only keep content from messages with seq >= "
        f"{window_start}. Drop anything that is known only from messages before seq "
        f"{window_start}.",
    ]
    if previous:
        parts.append(
            f"Previous summary (covers messages up to seq {previous_end}):\n"
            f"<previous_summary>\n{previous}\n</previous_summary>"
        )
    else:
        parts.append("There is no previous summary yet.")
    rendered = "\n".join(format_message(m, MAX_MESSAGE_CHARS_IN_PROMPT) for m in new_messages)
    parts.append(f"New messages:\n<new_messages>\n{rendered}\n</new_messages>")
    parts.append(
        f"Write the updated summary, at most {max_chars} characters. Output only the summary."
    )
    return "\n\n".join(parts)


def first_sentence(text: str, limit: int = MAX_SENTENCE_CHARS) -> str:
    """The first sentence of text with whitespace collapsed, cut to limit characters."""
    flat = " ".join(text.split())
    match = _SENTENCE_END.match(flat)
    sentence = match.group(1) if match else flat
    if len(sentence) > limit:
        sentence = sentence[: limit - 1].rstrip() + "…"
    return sentence


def extractive_summary(messages: list[dict[str, Any]], max_chars: int,
                       newest_first: bool = False) -> str:
    """Deterministic offline summary: the first sentence of each window message, newest kept.

    When the lines do not fit in max_chars the oldest are dropped first, because the window
    exists to favour recent work. `newest_first` (project docs): the lines newest first, so a
    reader that cuts the summary short (the agent's memories block) cuts the oldest.
    """
    lines = [f"{label(m)} {first_sentence(m['text'])}" for m in messages]
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + (1 if kept else 0) > max_chars:
            break
        used += len(line) + (1 if kept else 0)
        kept.append(line)
    if not kept and lines:
        return lines[-1][:max_chars]
    return "\n".join(kept if newest_first else reversed(kept))


class Summarizer:
    """Produces one window summary, with the LLM when there is one and it works."""

    def __init__(self, llm: TextLLM | None, max_chars: int):
        self.llm = llm
        self.max_chars = max_chars

    def summarize(
        self,
        *,
        kind: str,
        previous: str | None,
        previous_end: int | None,
        new_messages: list[dict[str, Any]],
        window_messages: list[dict[str, Any]],
        window_start: int,
        label: str,
    ) -> str:
        what = label
        """Return the summary text; an LLM failure falls back to the extract, never loses it."""
        if self.llm is not None:
            prompt = build_prompt(
                previous, previous_end, new_messages, window_start, self.max_chars
            )
            try:
                # Roughly 3 characters per token, with room so the model is not cut mid-sentence.
                text = self.llm.complete(
                    _SYSTEMS[kind], prompt, max_tokens=max(256, self.max_chars // 3)
                )
                if not isinstance(text, str) or not text.strip():
                    raise ValueError("the model returned an empty summary")
                return text.strip()[: self.max_chars]
            except Exception as exc:  # any model failure: the extract below still gives a summary
                log.warning(
                    "LLM summary failed for %s (%s: %s); using the extractive summary instead",
                    what, type(exc).__name__, exc,
                )
        return extractive_summary(window_messages, self.max_chars, newest_first=kind == "project")
