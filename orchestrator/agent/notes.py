"""The offline summariser's reading of a ticket: its decisions, rejected alternatives and the
human's instructions, found sentence by sentence by their wording (no model)."""

from __future__ import annotations

import re

# Wording that marks a sentence as one kind of note. The first kind that matches wins, in the
# order rejected, decided, instruction: "use X instead of Y" rejects Y before it decides X.
_REJECTED = re.compile(
    r"\b(instead of|rather than|rejected|ruled out|decided against|no longer|not going to|"
    r"(do not|don't|never|won't|will not) use)\b", re.I)
_DECIDED = re.compile(
    r"\b(decided|decision|we chose|chose to|going with|settled on|we will|we'll|agreed|because)\b", re.I)
_INSTRUCTION = re.compile(
    r"\b(must|should|always|never|do not|don't|make sure|keep|prefer|use|avoid|only)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_MAX_ITEMS = 5  # per kind: a note, not a copy of the ticket
_MAX_CHARS = 300


def sentences(text: str) -> list[str]:
    """The text's sentences and lines, code blocks and markup left out."""
    text = re.sub(r"(```|~~~).*?(\1|$)", " ", text, flags=re.S)  # code is not a note
    out = []
    for part in _SENTENCE.split(text):
        part = " ".join(part.strip(" -*#>\t").split())
        if len(part) >= 8 and any(c.isalpha() for c in part):
            out.append(part if len(part) <= _MAX_CHARS else part[:_MAX_CHARS - 3].rstrip() + "...")
    return out


def read_notes(description: str, responses: str = "") -> dict[str, list[str]]:
    """{"decisions", "rejected", "instructions"} found in the ticket's description (the human's
    words) and Claude Code's responses (its decisions only); kinds with nothing are left out."""
    notes: dict[str, list[str]] = {"decisions": [], "rejected": [], "instructions": []}
    for sentence in sentences(description):
        kind = ("rejected" if _REJECTED.search(sentence) else "decisions" if _DECIDED.search(sentence)
                else "instructions" if _INSTRUCTION.search(sentence) else None)
        if kind:
            notes[kind].append(sentence)
        if kind in ("rejected", "decisions") and _INSTRUCTION.search(sentence):
            notes["instructions"].append(sentence)  # the human said it: a rule as well
    for sentence in sentences(responses):
        kind = "rejected" if _REJECTED.search(sentence) else "decisions" if _DECIDED.search(sentence) else None
        if kind:
            notes[kind].append(sentence)
    return {k: list(dict.fromkeys(v))[:_MAX_ITEMS] for k, v in notes.items() if v}
