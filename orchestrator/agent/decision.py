"""The middle agent's structured replies and a tolerant JSON reader for them."""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Plan(BaseModel):
    """The planning reply: the first prompt (the "task instruction") for Claude Code."""

    model_config = ConfigDict(extra="ignore")
    prompt: str = Field(min_length=1, description="The exact prompt to send to Claude Code.")


class Decision(BaseModel):
    """Seed 000's assess reply: is the ticket complete, a summary, and the next prompt."""

    model_config = ConfigDict(extra="ignore")
    complete: bool = Field(description="True when the ticket's work is done and verified.")
    summary: str = Field(
        "", description="When complete: what was done, learned and overcome (indexed to memory)."
    )
    next_prompt: str = Field(
        "", description="When not complete: the exact next prompt to send to Claude Code."
    )


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
