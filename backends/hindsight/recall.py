"""recall: four strategies (semantic, keyword, graph, temporal) fused, boosted for evidence and
recency, optionally re-ranked, filtered by kind and tags, and cut to a token budget."""

from __future__ import annotations

import logging
import math
import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from backends import retrieval
from backends.storage import in_clause

from . import dates
from .kinds import KINDS  # noqa: F401 - re-exported
from .options import Strategy

if TYPE_CHECKING:
    from .parts import HindsightParts

log = logging.getLogger("middle.hindsight")

ENTITY_FANOUT = 50  # an entity in more facts than this says little about any one of them
COMMON_TERM_SHARE = 0.1
COMMON_TERM_MIN = 500
LINK_FACTORS = {"semantic": 1.0, "causal": 1.0, "temporal": 0.6}
Ranked = list[tuple[int, float]]


@dataclass
class Hit:
    """One recalled fact (or observation) with its fused score and the strategies that found it."""

    id: int
    text: str
    kind: str
    doc_id: int | None
    start: float
    end: float
    dated: bool
    mentioned_at: float
    sources: int
    score: float = 0.0
    found_by: dict[str, int] = field(default_factory=dict)  # strategy -> rank (1 = best)

    @property
    def when(self) -> str:
        """The fact's date for display: its range when dated, else when it was said."""
        if self.dated and self.end - self.start > dates.DAY + 1:
            return f"{dates.iso_day(self.start)} - {dates.iso_day(self.end - 1)}"
        return dates.iso_day(self.start if self.dated else self.mentioned_at)


@dataclass
class Recalled:
    hits: list[Hit]
    query: str
    truncated: bool = False
    span: dates.TimeSpan | None = None


def fuse(lists: Mapping[Strategy, Ranked], weights: Mapping[Strategy, float], method: str, k: int) -> Ranked:
    """Several ranked lists into one: weighted reciprocal rank (scaled so 1.0 is first
    everywhere) or a weighted sum of min-max-normalised scores. Ties break by id."""
    total = sum(weights.get(name, 0.0) for name, ranked in lists.items() if ranked) or 1.0
    fused: dict[int, float] = {}
    for name, ranked in lists.items():
        w = weights.get(name, 0.0)
        if not ranked or w <= 0:
            continue
        if method == "rrf":
            for rank, (i, _) in enumerate(ranked, start=1):
                fused[i] = fused.get(i, 0.0) + w * (k + 1) / (k + rank) / total
        else:
            for i, s in retrieval.fusion.min_max(ranked).items():
                fused[i] = fused.get(i, 0.0) + w * s / total
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def _rows(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Hit]:
    found: dict[int, Hit] = {}
    ids = list(ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        for r in conn.execute(
                "SELECT id, text, kind, doc_id, occurred_start, occurred_end, dated, mentioned_at, "
                f"sources FROM facts WHERE id IN {in_clause(chunk)}", chunk):
            found[r[0]] = Hit(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), r[7], r[8])
    return found


def _tagged(conn: sqlite3.Connection, ids: list[int], tags: list[str], match: str) -> set[int]:
    """Facts among ids carrying any (or all) of the tags."""
    if not ids:
        return set()
    rows = conn.execute(f"SELECT fact_id, COUNT(DISTINCT tag) FROM fact_tags WHERE fact_id IN "
                        f"{in_clause(ids)} AND tag IN {in_clause(tags)} GROUP BY fact_id",
                        (*ids, *tags)).fetchall()
    need = len(set(tags)) if match == "all" else 1
    return {i for i, n in rows if n >= need}


def recall(hb: HindsightParts, query: str, k: int, *, budget_tokens: int | None = None,
           types: Sequence[str] | None = None, tags: Sequence[str] | None = None,
           tags_match: str = "any") -> Recalled:
    """The best k facts for the query, best first (see the module docstring)."""
    opts = hb.options
    truncated = len(query) > opts.max_query_chars
    if truncated:
        log.warning("recall query of %d chars cut to max_query_chars = %d", len(query), opts.max_query_chars)
        query = query[:opts.max_query_chars]
    if k <= 0 or not query.strip():
        return Recalled([], query, truncated)
    kinds = set(types or KINDS)
    tags = list(tags or [])
    filtered = kinds != set(KINDS) or bool(tags)
    pool = opts.candidate_pool * (4 if filtered else 1)
    now = hb.clock()
    # Before the read (embedding is the slow part, hold no lock). The semantic list reads the
    # query's prose, the keyword list all of it (see retrieval.bm25.without_paths).
    qvec = hb.query_vector(retrieval.bm25.without_paths(query))
    with hb.bank.read() as conn:
        index = hb.bank.sync(conn)
        if index is None or len(index) == 0:
            return Recalled([], query, truncated)
        found, scores = index.search(qvec, pool)
        lists: dict[Strategy, Ranked] = {"semantic": list(zip(found, scores)),
                                    "keyword": keyword(hb, conn, query, pool, opts.context_weight)}
        seeds = fuse(lists, {"semantic": 1.0, "keyword": 1.0}, opts.fusion, opts.rrf_k)
        lists["graph"] = _graph(conn, seeds[:opts.graph_seeds], pool)
        when = dates.parse_query(query, now)
        lists["temporal"], span = _temporal(hb, conn, when, qvec, seeds, pool, now)
        if filtered:  # filter every list before fusing, so k results survive the filter
            union = list(dict.fromkeys(i for ranked in lists.values() for i, _ in ranked))
            rows = _rows(conn, union)
            allowed = {i for i, h in rows.items() if h.kind in kinds}
            if tags:
                allowed &= _tagged(conn, sorted(allowed), tags, tags_match)
            lists = {name: [(i, s) for i, s in ranked if i in allowed] for name, ranked in lists.items()}
        fused = fuse(lists, opts.strategy_weights, opts.fusion, opts.rrf_k)
        # Boosts only reorder near the top: rows for a margin beyond k are enough.
        fused = fused[:max(k + 20, 2 * k) if not opts.rerank_model else max(pool, k)]
        if opts.recent_candidates and opts.recency_weight and not filtered:
            # The newest facts join the candidates (RecencyOptions): the work just done is
            # weighed even when it shares no words with the query.
            held = {i for i, _ in fused}
            fused += [(r[0], 0.0) for r in conn.execute(
                "SELECT id FROM facts WHERE doc_id IS NOT NULL ORDER BY mentioned_at DESC, id DESC "
                "LIMIT ?", (len(fused) or k,)) if r[0] not in held]
        if not filtered:
            rows = _rows(conn, [i for i, _ in fused])
    ranks = {name: {j: r for r, (j, _) in enumerate(ranked, start=1)} for name, ranked in lists.items()}
    hits = []
    for i, score in fused:
        hit = rows[i]
        hit.found_by = {name: by[i] for name, by in ranks.items() if i in by}
        if opts.evidence_weight and hit.sources > 1:
            score *= 1 + opts.evidence_weight * math.log(hit.sources)
        # Recency counts from when a fact was said or retained, not the date it mentions: a
        # fix recorded today about an old date is recent work (questions about dates are the
        # temporal strategy's to answer).
        hit.score = retrieval.pipeline.with_recency(score, hit.mentioned_at, now, opts)
        hits.append(hit)
    hits = _rerank(hb, query, hits)
    hits.sort(key=lambda h: (-h.score, -h.mentioned_at, h.id))  # a tie: the newer fact first
    hits = hits[:k]
    if budget_tokens is not None:
        kept = {c.id for c in retrieval.pipeline.within_budget(
            [retrieval.pipeline.Candidate(h.id, h.text, h.score, h.start) for h in hits], budget_tokens)}
        hits = [h for h in hits if h.id in kept]
    return Recalled(hits, query, truncated, span)


def keyword(hb: HindsightParts, conn: sqlite3.Connection, query: str, k: int, context_weight: float) -> Ranked:
    """BM25 over each fact's text, and with context_weight over the fact said just before it
    (a question gives its answer the words a later query will use)."""
    terms = _selective_terms(hb, conn, retrieval.bm25.query_terms(query))
    return hb.bank.keyword(conn, terms, k, context_weight)


def _selective_terms(hb: HindsightParts, conn: sqlite3.Connection, terms: list[str]) -> list[str]:
    """The query's terms without those in more than COMMON_TERM_SHARE of the facts (a bank of
    at least COMMON_TERM_MIN facts): BM25 gives them almost no weight, yet scoring their
    thousands of matches is most of a keyword search's time. The rarest term always stays."""
    total = conn.execute("SELECT MAX(id) FROM facts").fetchone()[0] or 0
    if total < COMMON_TERM_MIN or len(terms) < 2:
        return terms
    cap = int(total * COMMON_TERM_SHARE) + 1
    counts = {t: hb.bank.term_count(conn, t, cap) for t in terms}
    return [t for t in terms if counts[t] < cap] or [min(terms, key=lambda t: counts[t])]


def _graph(conn: sqlite3.Connection, seeds: Ranked, pool: int) -> Ranked:
    """Spreading activation one hop from the seeds through semantic, causal and temporal links
    and through entities shared with few other facts (a seed is listed only when another seed
    reaches it: its own match is the other strategies' to count)."""
    if not seeds:
        return []
    act = {i: 1.0 / (1 + rank) for rank, (i, _) in enumerate(seeds)}
    ids = list(act)
    spread: dict[int, float] = {}
    for src, dst, kind, weight in conn.execute(
            f"SELECT src, dst, kind, weight FROM links WHERE src IN {in_clause(ids)}", ids):
        spread[dst] = spread.get(dst, 0.0) + act[src] * weight * LINK_FACTORS.get(kind, 0.5)
    for src, dst, mentions in conn.execute(
            "SELECT a.fact_id, b.fact_id, e.mentions FROM fact_entities a JOIN entities e ON "
            f"e.id = a.entity_id AND e.mentions <= {ENTITY_FANOUT} JOIN fact_entities b ON "
            f"b.entity_id = a.entity_id WHERE a.fact_id IN {in_clause(ids)} AND b.fact_id != a.fact_id",
            ids):
        spread[dst] = spread.get(dst, 0.0) + act[src] / math.log2(2 + max(mentions, 1))
    ranked = sorted(spread.items(), key=lambda x: (-x[1], x[0]))  # a seed counts when reached
    return ranked[:pool]


def _temporal(hb: HindsightParts, conn: sqlite3.Connection, when: dates.QueryTime,
              qvec: np.ndarray, seeds: Ranked, pool: int, now: float) -> tuple[Ranked, dates.TimeSpan | None]:
    """Facts whose time falls in the query's range, by similarity to the query; for a "when"
    question without a range, the dated facts among the best hits (they can answer it)."""
    span = when.span
    if span is None and when.anchor:
        span = _anchor_span(hb, conn, when.anchor, when.anchor_side or "after")
    if span is not None:
        lo = span.start if math.isfinite(span.start) else -1e18
        hi = span.end if math.isfinite(span.end) else 1e18
        ids = [r[0] for r in conn.execute(
            "SELECT id FROM facts WHERE occurred_start < ? AND occurred_end > ? ORDER BY "
            "occurred_start DESC LIMIT 5000", (hi, lo))]
        ids, matrix = hb.bank.matrix(conn, ids)
        if not ids:
            return [], span
        sims = matrix @ qvec
        order = np.lexsort((np.asarray(ids), -sims))[:pool]
        return [(ids[j], float(sims[j])) for j in order], span
    if when.asks_when and seeds:
        ids = [i for i, _ in seeds[:pool]]
        dated = {r[0] for r in conn.execute(
            f"SELECT id FROM facts WHERE dated = 1 AND id IN {in_clause(ids)}", ids)}
        return [(i, s) for i, s in seeds[:pool] if i in dated], None
    return [], None


def _anchor_span(hb: HindsightParts, conn: sqlite3.Connection, anchor: str, side: str
                 ) -> dates.TimeSpan | None:
    """'before the trip': the time of the best keyword match for 'the trip', as an open range."""
    hits = hb.bank.keyword(conn, retrieval.bm25.query_terms(anchor), 1, 1.0)
    if not hits:
        return None
    start, end = conn.execute("SELECT occurred_start, occurred_end FROM facts WHERE id = ?",
                              (hits[0][0],)).fetchone()
    if side == "before":
        return dates.TimeSpan(float("-inf"), start, f"before {anchor}")
    return dates.TimeSpan(end, float("inf"), f"after {anchor}")


def _rerank(hb: HindsightParts, query: str, hits: list[Hit]) -> list[Hit]:
    """A cross-encoder's sigmoid, blended half and half with the fused score, when configured."""
    if not hb.options.rerank_model or not hits:
        return hits
    reranker = retrieval.pipeline.load_reranker(hb.options.rerank_model)
    top = hits[:hb.options.candidate_pool]
    relevance = retrieval.pipeline.sigmoid(reranker.score(query, [h.text for h in top]))
    best = max(h.score for h in top) or 1.0
    for hit, rel in zip(top, relevance):
        hit.score = 0.5 * hit.score / best + 0.5 * float(rel)
    return top
