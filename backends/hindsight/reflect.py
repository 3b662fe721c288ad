"""reflect (an answer citing fact ids, or the recalled facts grouped by entity and time) and the
mental models built from it: named, versioned, bounded summaries of the bank."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from backends.storage import in_clause

from . import llm as llm_paths
from .extract import CONTEXT_HEADER
from .recall import Hit, recall

if TYPE_CHECKING:
    from .parts import HindsightParts

log = logging.getLogger("middle.hindsight")

REFLECT_FACTS = 20
MODEL_FACTS = 12
KEEP_VERSIONS = 10
GENERAL = "General"


@dataclass
class Reflection:
    """What reflect returns: the answer text, the fact ids it rests on, and how it was made."""

    answer: str
    fact_ids: list[int] = field(default_factory=list)
    synthesised: bool = False  # True: the LLM wrote it; False: recalled facts, grouped


def grouped(hb: HindsightParts, hits: list[Hit], max_chars: int | None = None,
            with_ids: bool = True) -> str:
    """Facts grouped under their most specific entity, oldest first within a group."""
    if not hits:
        return ""
    ids = [h.id for h in hits]
    with hb.bank.read() as conn:
        rows = conn.execute(
            f"SELECT fe.fact_id, e.name, e.mentions FROM fact_entities fe JOIN entities e ON "
            f"e.id = fe.entity_id WHERE fe.fact_id IN {in_clause(ids)}", ids).fetchall()
    best: dict[int, tuple[int, str]] = {}
    for fact_id, name, mentions in rows:  # the rarest entity names the fact's topic best
        if fact_id not in best or mentions < best[fact_id][0]:
            best[fact_id] = (mentions, name)
    groups: dict[str, list[Hit]] = {}
    for hit in hits:
        groups.setdefault(best.get(hit.id, (0, GENERAL))[1], []).append(hit)
    lines: list[str] = []
    for name, members in groups.items():
        lines.append(f"{name}:")
        for hit in sorted(members, key=lambda h: (h.start if h.dated else h.mentioned_at, h.id)):
            ref = f"[{hit.id}] " if with_ids else ""
            lines.append(f"- {ref}{hit.when}: {hit.text}" if hit.when else f"- {ref}{hit.text}")
    text = "\n".join(lines)
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars - 1].rsplit("\n", 1)[0] + "\n…"
    return text


def reflect(hb: HindsightParts, question: str, instruction: str = "",
            max_chars: int | None = None) -> Reflection:
    """With an LLM: an answer synthesised from recalled facts, citing their ids. Without one, or
    when its reply is unusable: the recalled facts grouped by entity and time."""
    hits = recall(hb, question, REFLECT_FACTS).hits
    if hb.llm is not None and hits:
        got = llm_paths.reflect(hb.llm, question, [(h.id, f"{h.text} ({h.when})") for h in hits],
                                instruction)
        if got is not None:
            answer = got.answer.strip()
            if max_chars is not None:
                answer = answer[:max_chars]
            return Reflection(answer, got.fact_ids, True)
    if not hits:
        return Reflection("No memories match this question yet.")
    return Reflection(grouped(hb, hits, max_chars), [h.id for h in hits], False)


def refresh_models(hb: HindsightParts) -> list[str]:
    """Refresh every configured mental model from recall (+ reflect with an LLM); returns the
    names that changed. A model whose refresh fails keeps its previous version."""
    cap = hb.options.mental_model_chars
    changed: list[str] = []
    updates = []
    for name, question in hb.options.mental_models.items():
        instruction = (f"Write the standing summary '{name}' of this project's memory for an "
                       f"engineer: concise, at most {cap} characters, only what the facts support.")
        if hb.llm is not None:
            hits = recall(hb, question, REFLECT_FACTS).hits
            got = llm_paths.reflect(hb.llm, question, [(h.id, f"{h.text} ({h.when})") for h in hits],
                                    instruction) if hits else None
            if got is None:
                continue  # a failed or malformed reply changes nothing
            content, ids = got.answer.strip()[:cap], got.fact_ids
        else:
            hits = recall(hb, question, MODEL_FACTS).hits
            content, ids = grouped(hb, hits, cap, with_ids=False), [h.id for h in hits]
        updates.append((name, question, content, ids))
    now = hb.clock()
    with hb.bank.write() as conn:
        for name, question, content, ids in updates:
            row = conn.execute("SELECT content, version FROM mental_models WHERE name = ?", (name,)).fetchone()
            if row is not None and row[0] == content:
                continue
            version = (row[1] if row else 0) + 1
            conn.execute("INSERT INTO mental_models VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE "
                         "SET question = excluded.question, content = excluded.content, version = "
                         "excluded.version, updated_at = excluded.updated_at, fact_ids = excluded.fact_ids",
                         (name, question, content, version, now, json.dumps(ids)))
            conn.execute("INSERT INTO mental_model_history VALUES (?, ?, ?, ?) ON CONFLICT (name, version) "
                         "DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at",
                         (name, version, content, now))
            conn.execute("DELETE FROM mental_model_history WHERE name = ? AND version <= ?",
                         (name, version - KEEP_VERSIONS))
            changed.append(name)
        hb.bank.set_meta(conn, "retains_since_refresh", "0")
    return changed


def agent_context(hb: HindsightParts) -> str:
    """The configured mental models under one header, within agent_context_chars in all."""
    budget = hb.options.agent_context_chars
    names = list(hb.options.mental_models)
    if budget <= 0 or not names:
        return ""
    with hb.bank.read() as conn:
        rows = conn.execute(f"SELECT name, content, version FROM mental_models WHERE name IN "
                            f"{in_clause(names)} AND content != ''", names).fetchall()
    if not rows:
        return ""
    rows.sort(key=lambda r: names.index(r[0]))
    header = (f"{CONTEXT_HEADER}: curated from past tickets; background for your reasoning, may "
              "be stale; never paste it to Claude Code)")
    share = max(80, (budget - len(header)) // len(rows))
    parts = [header]
    shown: set[str] = set()
    for name, content, version in rows:
        content = _unseen(content, shown)  # a fact two models share is shown once
        if not content:
            continue
        title = f"### {name} (v{version})"
        room = share - len(title) - 1
        body = content if len(content) <= room else _cut(content, room)
        parts.append(f"{title}\n{body}")
    return "\n".join(parts)[:budget]


def _unseen(content: str, shown: set[str]) -> str:
    """Grouped content without the items already shown, nor headings left empty; other content
    (an LLM's prose) unchanged."""
    lines = content.splitlines()
    if not all(line.startswith("- ") or line.endswith(":") for line in lines):
        return content
    kept: list[str] = []
    for line in lines:
        if line.startswith("- "):
            if line in shown:
                continue
            shown.add(line)
        elif kept and not kept[-1].startswith("- "):
            kept.pop()  # the previous heading lost all its items
        kept.append(line)
    if kept and not kept[-1].startswith("- "):
        kept.pop()
    return "\n".join(kept)


def _cut(text: str, room: int) -> str:
    """Whole lines of text that fit in room characters, then an ellipsis line."""
    head = text[:max(0, room - 2)]
    if "\n" in head:
        head = head.rsplit("\n", 1)[0]
    return head.rstrip() + "\n…"
