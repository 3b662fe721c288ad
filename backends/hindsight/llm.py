"""The LLM paths (fact extraction, consolidation, reflect): prompts and schema-validated replies.

Every function returns None when the model fails or its reply does not validate; the caller
then keeps its offline result, so one bad reply never changes the bank.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.plugin_api import TextLLM

from . import dates
from .extract import DraftFact

log = logging.getLogger("middle.hindsight.llm")

M = TypeVar("M", bound=BaseModel)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExtractedFact(_Strict):
    text: str = Field(min_length=1, max_length=4000)
    kind: Literal["world", "experience"]
    entities: list[str] = Field(default_factory=list, max_length=30)
    occurred_start: str | None = None  # ISO date; relative dates resolved by the model
    occurred_end: str | None = None
    caused_by: list[int] = Field(default_factory=list, description="indexes of earlier facts here")
    caused_by_existing: list[int] = Field(default_factory=list, description="ids of known facts")


class Extraction(_Strict):
    facts: list[ExtractedFact] = Field(max_length=200)


class Consolidation(_Strict):
    action: Literal["merge", "separate"]
    text: str = Field(default="", max_length=4000)


class Reflection(_Strict):
    answer: str = Field(min_length=1, max_length=20000)
    fact_ids: list[int] = Field(default_factory=list)


EXTRACT_SYSTEM = (
    "You extract durable memory facts from text for a coding agent's project memory. Reply with "
    "JSON only, matching this JSON schema:\n{schema}\nRules: each fact is one self-contained "
    "statement (resolve pronouns to names); kind 'world' is about the project and its world, "
    "'experience' is what the agent or a person did, tried or learned; entities are the names "
    "of people, places, tools, files and components in it; occurred_start/occurred_end are ISO "
    "dates (YYYY-MM-DD) of when it happened, with relative dates ('yesterday', 'last week') "
    "resolved against the retain date; caused_by lists indexes of earlier facts in your list "
    "that caused this one, caused_by_existing ids of the known facts shown that caused it.")
CONSOLIDATE_SYSTEM = (
    "You maintain observations in a memory bank: each covers one facet. Given an observation and "
    "a new, similar fact, reply with JSON only: {{\"action\": \"merge\", \"text\": \"<the "
    "observation rewritten to include the fact>\"}} when the fact is about the same facet, or "
    "{{\"action\": \"separate\"}} when it is about another. JSON schema:\n{schema}")
REFLECT_SYSTEM = (
    "You answer a question from a project's memory. Use only the facts given (each has an id). "
    "Reply with JSON only, matching this JSON schema:\n{schema}\nCite in fact_ids the ids of the "
    "facts your answer uses. If the facts do not answer it, say so in the answer.")


def parse_reply(reply: Any, model: type[M]) -> M | None:
    """The reply validated against the model: the JSON object in it (code fences allowed)."""
    if not isinstance(reply, str):
        return None
    text = reply.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        return model.model_validate(json.loads(text[start:end + 1]))
    except (json.JSONDecodeError, ValidationError, ValueError, RecursionError):
        return None


def _ask(llm: TextLLM, system: str, prompt: str, model: type[M], max_tokens: int, what: str) -> M | None:
    try:
        reply = llm.complete(system.format(schema=json.dumps(model.model_json_schema())), prompt,
                             max_tokens)
    except Exception as exc:  # a model failure never fails a retain: the offline path stands
        log.warning("memory LLM failed during %s (%s); keeping the offline result", what, exc)
        return None
    parsed = parse_reply(reply, model)
    if parsed is None:
        log.warning("memory LLM reply for %s is not valid JSON for its schema; keeping the "
                    "offline result (reply starts %r)", what, str(reply)[:120])
    return parsed


def extract_facts(llm: TextLLM, text: str, retained_at: float,
                  known: list[tuple[int, str]]) -> list[DraftFact] | None:
    """Facts of one document by the LLM, or None (the caller keeps the offline facts)."""
    context = "\n".join(f"[{i}] {t}" for i, t in known) or "(none)"
    prompt = (f"Retain date: {dates.iso_day(retained_at)}\nKnown facts (for caused_by_existing):\n"
              f"{context}\n\nText:\n{text}")
    parsed = _ask(llm, EXTRACT_SYSTEM, prompt, Extraction, 2048, "fact extraction")
    if parsed is None:
        return None
    known_ids = {i for i, _ in known}
    facts = []
    for n, item in enumerate(parsed.facts):
        start, end = dates.parse_iso(item.occurred_start), dates.parse_iso(item.occurred_end)
        if start is not None and (end is None or end < start):
            end = start
        if start is not None:
            end = (end or start) + dates.DAY  # a day given is the whole day
        facts.append(DraftFact(
            text=item.text.strip(), kind=item.kind, entities=[e for e in item.entities if e.strip()],
            start=start, end=end, caused_by=[c for c in item.caused_by if 0 <= c < n],
            cause_ids=[c for c in item.caused_by_existing if c in known_ids]))
    return [f for f in facts if f.text] or None


def consolidate(llm: TextLLM, observation: str, fact: str) -> Consolidation | None:
    prompt = f"Observation:\n{observation}\n\nNew fact:\n{fact}"
    parsed = _ask(llm, CONSOLIDATE_SYSTEM, prompt, Consolidation, 1024, "consolidation")
    if parsed is not None and parsed.action == "merge" and not parsed.text.strip():
        log.warning("memory LLM merged an observation into empty text; ignoring the reply")
        return None
    return parsed


def reflect(llm: TextLLM, question: str, facts: list[tuple[int, str]],
            instruction: str = "", max_tokens: int = 1024) -> Reflection | None:
    """An answer from the facts, citing fact ids that were given; None on a bad reply."""
    listing = "\n".join(f"[{i}] {t}" for i, t in facts) or "(no facts)"
    prompt = f"{instruction}\nQuestion: {question}\n\nFacts:\n{listing}".strip()
    parsed = _ask(llm, REFLECT_SYSTEM, prompt, Reflection, max_tokens, "reflect")
    if parsed is not None:
        given = {i for i, _ in facts}
        parsed.fact_ids = [i for i in dict.fromkeys(parsed.fact_ids) if i in given]
    return parsed
