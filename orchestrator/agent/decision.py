"""The middle agent's structured replies and a tolerant JSON reader for them."""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class Plan(BaseModel):
    """The planning reply: the first prompt (the "task instruction") for Claude Code."""

    model_config = ConfigDict(extra="ignore")
    prompt: str = Field(min_length=1, description="The exact prompt to send to Claude Code.")


NOTE_FIELDS = ("decisions", "rejected", "instructions")
MEMORIES_USED = "memories_used"  # the decision's account of the memories it relied on


class MemoryUse(BaseModel):
    """One recalled memory the agent relied on: its id as the block shows it, and why."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(description="The memory's id, the 8 characters in [brackets] before it.")
    why: str = Field("", description="A few words: what it was used for.")


class Decision(BaseModel):
    """The assess reply of the workflow contract: is the ticket complete, a summary, and the next prompt."""

    model_config = ConfigDict(extra="ignore")
    complete: bool = Field(description="True when the ticket's work is done and verified.")
    summary: str = Field(
        "", description="When complete: what was done, learned and overcome (indexed to memory)."
    )
    next_prompt: str = Field(
        "", description="When not complete: the exact next prompt to send to Claude Code."
    )
    # Optional (issue 23): what a later ticket must know, kept in the completion doc.
    decisions: list[str] = Field(
        default_factory=list,
        description="When complete: each decision made, with why (e.g. 'Kept tabs: the linter enforces them').")
    rejected: list[str] = Field(
        default_factory=list,
        description="When complete: each alternative considered and rejected, with why.")
    instructions: list[str] = Field(
        default_factory=list,
        description="When complete: each instruction or rule the human gave in the ticket, in their words.")
    # Optional (issue 31): the agent's account of the recalled memories it relied on.
    memories_used: list[MemoryUse] = Field(
        default_factory=list,
        description="The recalled memories (by the id in [brackets] before each) this decision "
                    "relied on, each with a few words why; empty when none helped.")

    def record(self) -> dict[str, Any]:
        """The decision as stored with its turn: the contract's three keys, and the lists only when
        the agent filled them."""
        data = self.model_dump()
        return {k: v for k, v in data.items() if v != [] or k not in (*NOTE_FIELDS, MEMORIES_USED)}

    def only_shown(self, memories: str) -> list[MemoryUse]:
        """Keep the memories_used the agent was shown (an id in `memories`, the block it read);
        returns the ones dropped (ids it made up or misread)."""
        shown = [m for m in self.memories_used if f"[{m.id}]" in memories]
        dropped = [m for m in self.memories_used if m not in shown]
        self.memories_used = shown
        return dropped

    @field_validator("memories_used", mode="before")
    @classmethod
    def _uses(cls, value: Any) -> list[Any]:
        """A list of {"id", "why"}, or of bare ids; ids lower-cased, without brackets."""
        if value is None:
            return []
        if isinstance(value, (str, dict)):
            value = [value]
        if not isinstance(value, list):
            raise ValueError("must be a list of {\"id\": ..., \"why\": ...}")
        uses = []
        for item in value:
            if isinstance(item, str):
                item = {"id": item}
            if isinstance(item, dict) and str(item.get("id", "")).strip():
                ident = str(item["id"]).strip().strip("[]").lower()
                uses.append({"id": ident, "why": str(item.get("why") or "").strip()})
        return uses

    @field_validator("decisions", "rejected", "instructions", mode="before")
    @classmethod
    def _items(cls, value: Any) -> list[str]:
        """Models reply a string, null or a list: always a list of non-empty strings."""
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ValueError("must be a list of strings")
        return [str(item).strip() for item in value if item is not None and str(item).strip()]


M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def parse_reply(text: str, model: type[M]) -> M:
    """Read a JSON object (bare, fenced, or embedded in prose) into `model`.

    Raises ValueError with a short reason the repair prompt can quote back to the model.
    """
    candidates = [text.strip()]
    candidates += _FENCE.findall(text)
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    last_error = "the reply contains no JSON object"
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError as exc:
            last_error = f"not valid JSON ({exc})"
            continue
        if not isinstance(data, dict):
            last_error = "the JSON is not an object"
            continue
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            last_error = "; ".join(
                f"{'.'.join(str(x) for x in e['loc']) or 'object'}: {e['msg']}" for e in exc.errors()
            )
    raise ValueError(last_error)
