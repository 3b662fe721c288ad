"""retain: facts extracted (LLM or offline), embedded, then written in one transaction with
their entities, temporal/semantic/causal links and observation updates."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sqlite3
from collections.abc import Container
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

from backends import retrieval
from backends.retrieval.embedders.states import STATES_AT_ONCE
from backends.storage import in_clause, inserted_id

from . import extract
from . import llm as llm_paths
from .bank import BankParts
from .entities import Resolver
from .observations import consolidate_fact, existing, remove_facts

if TYPE_CHECKING:
    from .parts import HindsightParts

log = logging.getLogger("middle.hindsight")
CONTEXT_WINDOW_S = 3600.0  # facts said within an hour of each other belong to one exchange
CONTEXT_CHARS = 500


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class RetainItem:
    """One document to retain: its text, event time, tags, key (document id) and source."""

    text: str
    timestamp: float | None = None
    tags: list[str] = field(default_factory=list)
    key: str | None = None  # None: the text's hash (index() semantics: same text, same doc)
    source: str = "index"

    def __post_init__(self) -> None:
        if self.key is None:
            self.key = text_hash(self.text)


@dataclass
class _Prepared:
    item: RetainItem
    when: float
    facts: list[extract.DraftFact]
    extractor: str
    vectors: np.ndarray | None = None


def check_tags(tags: object) -> list[str]:
    """Tags as a list of non-empty strings (any characters; they are bound, never spliced)."""
    if tags is None:
        return []
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)):
        raise TypeError(f"tags must be a list of strings, not {type(tags).__name__}")
    out = []
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip() or len(tag) > 200:
            raise ValueError(f"bad tag {tag!r}: use a non-empty string of at most 200 characters")
        tag.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError (a ValueError)
        out.append(tag.strip())
    return list(dict.fromkeys(out))


def retain_items(hb: HindsightParts, items: Sequence[RetainItem]) -> list[int]:
    """Retain documents; returns the ids of documents written (new or replaced)."""
    now = hb.clock()
    with hb.bank.read() as conn:
        present = {k: h for k, h in _keys(conn, [i.key for i in items])}
    todo: dict[str, RetainItem] = {}
    for item in items:  # the first of a key in the batch wins; an unchanged doc is skipped
        key = item.key
        assert key is not None  # __post_init__ sets it
        if present.get(key) != text_hash(item.text):
            todo.setdefault(key, item)
    known = KnownAliases(hb.bank)
    prepared = [_prepare(hb, item, now, known) for item in todo.values()]
    if not any(p.facts for p in prepared):
        return []
    _embed(hb, prepared)  # before any write
    with hb.bank.write() as conn:
        hb.bank.sync(conn)
        touched: list[int] = []
        written: list[int] = []
        resolver = Resolver(conn, now)
        fresh: list[tuple[int, np.ndarray]] = []
        for p in prepared:
            doc_id = _write_document(hb, conn, p, now, resolver, touched, fresh)
            if doc_id is not None:
                written.append(doc_id)
        _semantic_links(hb, conn, fresh)
        matrix = np.vstack([v for _, v in fresh]) if fresh else None
        fresh_ids = [i for i, _ in fresh]
        for n, (fact_id, vector) in enumerate(fresh):
            consolidate_fact(hb, conn, fact_id, vector, touched, fresh_ids[:n], matrix)
        if touched:
            hb.bank.bump(conn, touched)
        if written:
            count = int(hb.bank.meta(conn, "retains_since_refresh") or 0) + 1
            hb.bank.set_meta(conn, "retains_since_refresh", str(count))
    return written


def _embed(hb: HindsightParts, prepared: list[_Prepared]) -> None:
    """Set each doc's fact vectors: with fact_vectors = "passage", pooled from one model pass
    over the doc where the fact's ranges lie; the others (and every fact under "text", or an
    embedder without token states) embedded alone, in one batch."""
    reaches = [max((end for f in p.facts for _, end in f.ranges), default=0) for p in prepared]
    read = [i for i, reach in enumerate(reaches) if hb.fact_vectors == "passage" and reach]
    found: list[list[np.ndarray | None]] = [[None] * len(p.facts) for p in prepared]
    # Many docs' model passes at once keep all cores busy on an import (token_states_many),
    # a bounded number at a time: a doc's states are held until its facts are pooled.
    for start in range(0, len(read), STATES_AT_ONCE):
        chunk = read[start:start + STATES_AT_ONCE]
        wanted = [(prepared[i].item.text, reaches[i]) for i in chunk]
        for i, got in zip(chunk, hb.embedder.token_states_many(wanted)):
            if got is not None:
                found[i] = [got.pool(f.ranges) for f in prepared[i].facts]
    alone = [(i, n) for i, row in enumerate(found) for n, v in enumerate(row) if v is None]
    if alone:
        texts = [prepared[i].facts[n].text for i, n in alone]
        for (i, n), vector in zip(alone, retrieval.embed_documents(hb.embedder, texts, hb.cache)):
            found[i][n] = vector
    for p, row in zip(prepared, found):
        vectors = [v for v in row if v is not None]
        assert len(vectors) == len(row)  # every part without a pooled vector was embedded above
        p.vectors = np.vstack(vectors).astype(np.float32, copy=False) if vectors else None


class KnownAliases:
    """Whether a name is a known entity alias, looked up one name at a time: the extractor asks
    about a few sentence-initial words per doc, and loading every alias of the bank for them
    cost time growing with the bank (0.5 ms a retain at 3,000 tickets)."""

    def __init__(self, bank: BankParts):
        self.bank = bank
        self._answers: dict[str, bool] = {}

    def __bool__(self) -> bool:
        return True

    def __contains__(self, alias: object) -> bool:
        if not isinstance(alias, str):
            return False
        if alias not in self._answers:
            with self.bank.read() as conn:
                self._answers[alias] = conn.execute(
                    "SELECT 1 FROM entity_aliases WHERE alias = ?", (alias,)).fetchone() is not None
        return self._answers[alias]


def _keys(conn: sqlite3.Connection, keys: list[str | None]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    keys = list(dict.fromkeys(k for k in keys if k))
    for start in range(0, len(keys), 500):
        chunk = keys[start:start + 500]
        rows += conn.execute(f"SELECT key, text_hash FROM documents WHERE key IN {in_clause(chunk)}",
                             chunk).fetchall()
    return rows


def _prepare(hb: HindsightParts, item: RetainItem, now: float,
             known: Container[str]) -> _Prepared:
    """Offline facts always; the LLM's instead when configured, the doc long enough and the
    reply valid (a bad reply leaves the offline facts)."""
    when = item.timestamp if item.timestamp is not None else now
    opts = hb.options
    facts = extract.extract(item.text, when, opts.max_facts_per_doc, known)
    extractor = "offline"
    clean = extract.strip_memory_text(item.text)
    if (hb.llm is not None and opts.llm_extraction and len(clean) >= opts.llm_extraction_min_chars):
        hits = hb.recall_facts(clean[:1000], 5) if hb.has_facts() else []
        got = llm_paths.extract_facts(hb.llm, clean, when, [(h.id, h.text) for h in hits])
        if got:
            facts, extractor = got[: opts.max_facts_per_doc], "llm"
    if not facts:  # nothing but memory text or whitespace: keep the doc findable by its text
        facts = [extract.DraftFact(item.text.strip() or item.text or " ")]
    return _Prepared(item, when, facts, extractor)


def _write_document(hb: HindsightParts, conn: sqlite3.Connection, p: _Prepared, now: float,
                    resolver: Resolver, touched: list[int],
                    fresh: list[tuple[int, np.ndarray]]) -> int | None:
    item = p.item
    digest = text_hash(item.text)
    row = conn.execute("SELECT id, text_hash FROM documents WHERE key = ?", (item.key,)).fetchone()
    if row is not None:
        if row[1] == digest:
            return None  # another writer retained the same doc meanwhile
        old = [r[0] for r in conn.execute("SELECT id FROM facts WHERE doc_id = ?", (row[0],))]
        remove_facts(hb, conn, old, touched)  # re-retaining a document id replaces its facts
        conn.execute("DELETE FROM documents WHERE id = ?", (row[0],))
    doc_id = inserted_id(conn.execute(
        "INSERT INTO documents (key, text_hash, text, source, retained_at, event_time, tags, extractor) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (item.key, digest, item.text, item.source, now, p.when, json.dumps(item.tags), p.extractor),
    ))
    ids: list[int] = []
    assert p.vectors is not None
    for position, (fact, vector) in enumerate(zip(p.facts, p.vectors)):
        dated = fact.start is not None
        start = fact.start if fact.start is not None else p.when
        end = fact.end if dated and fact.end is not None else start + 1
        context = _context(conn, p.when)
        fact_id = inserted_id(conn.execute(
            "INSERT INTO facts (doc_id, text, kind, occurred_start, occurred_end, dated, mentioned_at, "
            "created_at, position, context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (doc_id, fact.text, fact.kind, start, end, int(dated), p.when, now, position, context)))
        hb.bank.index_text(conn, fact_id, fact.text, context)
        conn.execute("INSERT INTO vectors (id, vec) VALUES (?, ?)",
                     (fact_id, np.asarray(vector, dtype=np.float32).tobytes()))
        conn.executemany("INSERT INTO fact_tags VALUES (?, ?) ON CONFLICT DO NOTHING",
                         [(fact_id, t) for t in item.tags])
        resolver.link(fact_id, resolver.resolve(fact.entities, p.when), p.when)
        for cause in fact.caused_by:
            _link(conn, ids[cause], fact_id, "causal", 1.0)
        for cause in fact.cause_ids:
            if conn.execute("SELECT 1 FROM facts WHERE id = ?", (cause,)).fetchone():
                _link(conn, cause, fact_id, "causal", 1.0)
        _temporal_links(hb, conn, fact_id, p.when)
        ids.append(fact_id)
        touched.append(fact_id)
        fresh.append((fact_id, vector))
    return doc_id


def _context(conn: sqlite3.Connection, when: float) -> str:
    """The fact said just before, when within CONTEXT_WINDOW_S (the same conversation or doc):
    keyword search reads it with a lower weight, as a question gives its answer context."""
    row = conn.execute("SELECT text, mentioned_at FROM facts WHERE doc_id IS NOT NULL "
                       "ORDER BY id DESC LIMIT 1").fetchone()
    if row is None or abs(row[1] - when) > CONTEXT_WINDOW_S:
        return ""
    return row[0][:CONTEXT_CHARS]


def _link(conn: sqlite3.Connection, a: int, b: int, kind: str, weight: float) -> None:
    """Links are stored both ways, so spreading is one indexed lookup on `src`."""
    conn.executemany("INSERT INTO links VALUES (?, ?, ?, ?) ON CONFLICT (src, dst, kind) "
                     "DO UPDATE SET weight = excluded.weight",
                     [(a, b, kind, weight), (b, a, kind, weight)])


def _temporal_links(hb: HindsightParts, conn: sqlite3.Connection, fact_id: int, when: float) -> None:
    """Link to the facts retained just before that lie within the window (time, then order)."""
    n = hb.options.temporal_links_per_fact
    if n <= 0:
        return
    window = hb.options.temporal_link_window_days * 86400.0
    rows = conn.execute(
        "SELECT id, mentioned_at FROM facts WHERE id < ? AND doc_id IS NOT NULL AND mentioned_at "
        "BETWEEN ? AND ? ORDER BY id DESC LIMIT ?", (fact_id, when - window, when + window, n)).fetchall()
    for other, t in rows:
        _link(conn, other, fact_id, "temporal", math.exp(-abs(when - t) / window))


def _semantic_links(hb: HindsightParts, conn: sqlite3.Connection,
                    fresh: list[tuple[int, np.ndarray]]) -> None:
    """Links to nearest neighbours above the threshold: among stored facts (the mirror, synced
    at the start of this write) and among the facts of this batch."""
    n, threshold = hb.options.semantic_links_per_fact, hb.options.semantic_link_threshold
    if n <= 0 or not fresh:
        return
    index = hb.bank.sync(conn)  # as at the start of this write: this batch is not in it yet
    ids = [i for i, _ in fresh]
    matrix = np.vstack([v for _, v in fresh])
    within = matrix @ matrix.T
    for row, (fact_id, vector) in enumerate(fresh):
        pairs: list[tuple[int, float]] = []
        if index is not None and len(index):
            found, scores = index.search(vector, n)
            pairs += [(i, s) for i, s in zip(found, scores) if s >= threshold]
            pairs = [(i, s) for i, s in pairs if i in existing(conn, [i for i, _ in pairs])]
        order: list[int] = np.argsort(-within[row, :row])[:n].tolist() if row else []
        pairs += [(ids[j], float(within[row, j])) for j in order if within[row, j] >= threshold]
        for other, score in sorted(pairs, key=lambda p: -p[1])[:n]:
            if other != fact_id:
                _link(conn, other, fact_id, "semantic", float(score))
