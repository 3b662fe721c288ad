"""Pipeline stages over a candidate pool: rerank, threshold, importance, recency, MMR, budget."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np

from orchestrator.plugin_api import ConfigError

from .options import PipelineOptions, RecencyOptions

DAY_S = 86400.0
CHARS_PER_TOKEN = 4  # a rough English average; only used for the token budget


@dataclass
class Candidate:
    id: int
    text: str
    relevance: float  # in [0, 1]: fused score, or the reranker's sigmoid
    doc_time: float
    importance: int = 3
    vector: np.ndarray | None = None
    score: float = 0.0


class Reranker(Protocol):
    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Raw relevance logits, one per text."""


_rerankers: dict[str, Any] = {}
_rerankers_lock = threading.Lock()


def load_reranker(spec: str) -> Reranker:
    """A cross-encoder by 'sentence-transformers:NAME' or 'fastembed:NAME', once per process."""
    kind, _, model = spec.partition(":")
    if kind not in ("sentence-transformers", "fastembed") or not model:
        raise ConfigError(f"rerank_model {spec!r}: use 'sentence-transformers:NAME' or "
                          "'fastembed:NAME' (e.g. 'sentence-transformers:cross-encoder/"
                          "ms-marco-MiniLM-L-6-v2')")
    with _rerankers_lock:
        if spec not in _rerankers:
            _rerankers[spec] = _CrossEncoder(kind, model)
        return _rerankers[spec]


class _CrossEncoder:
    def __init__(self, kind: str, model: str):
        try:
            if kind == "sentence-transformers":
                from sentence_transformers import CrossEncoder

                self._model = CrossEncoder(model, device="cpu")
            else:
                from fastembed.rerank.cross_encoder import TextCrossEncoder

                self._model = TextCrossEncoder(model)
        except ImportError:
            raise ConfigError(f"rerank_model needs the {kind!r} package: run pip install "
                              f"{kind}, or unset rerank_model") from None
        self.kind = kind

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        if self.kind == "sentence-transformers":
            return np.asarray(self._model.predict([(query, t) for t in texts]), dtype=float)
        return np.asarray(list(self._model.rerank(query, list(texts))), dtype=float)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def run(query: str, candidates: list[Candidate], k: int, opts: PipelineOptions,
        now: float, reranker: Reranker | None = None) -> list[Candidate]:
    """The pipeline's top k, best first; each candidate's `score` is what it was ranked by."""
    if not candidates or k <= 0:
        return []
    if reranker is not None:
        logits = reranker.score(query, [c.text for c in candidates])
        for c, rel in zip(candidates, sigmoid(logits)):
            c.relevance = float(rel)
    if opts.relevance_threshold is not None:
        candidates = [c for c in candidates if c.relevance >= opts.relevance_threshold]
    for c in candidates:
        total = c.relevance * (c.importance / 3.0 if opts.use_importance else 1.0)
        c.score = with_recency(total, c.doc_time, now, opts)
    ranked = sorted(candidates, key=lambda c: (-c.score, -c.doc_time, c.id))  # tie: newer first
    if opts.mmr_lambda is not None:
        ranked = mmr(ranked, k, opts.mmr_lambda)
    else:
        ranked = ranked[:k]
    if opts.token_budget is not None:
        ranked = within_budget(ranked, opts.token_budget)
    return ranked


def with_recency(relevance: float, doc_time: float, now: float, opts: RecencyOptions) -> float:
    """The recency blend: (1 - w) * relevance + w * exp(-age_days / scale)."""
    if not opts.recency_weight:
        return relevance
    age_days = max(0.0, (now - doc_time) / DAY_S)
    recency = math.exp(-age_days / opts.recency_scale_days)
    return (1 - opts.recency_weight) * relevance + opts.recency_weight * recency


def mmr(ranked: list[Candidate], k: int, lam: float) -> list[Candidate]:
    """Maximal marginal relevance: lam * score - (1 - lam) * max cosine to those picked.

    The value each pick is chosen by becomes its score; it never increases from one pick to the
    next (redundancy only grows), so the result stays sorted best first.
    """
    if not ranked:
        return []
    held = [c.vector for c in ranked if c.vector is not None]
    if len({v.shape[0] for v in held}) != 1 or len(held) < len(ranked):
        return ranked[:k]  # no vectors (bm25-only store): nothing to measure redundancy with
    vectors = np.vstack(held)
    scores = np.asarray([c.score for c in ranked])
    redundancy = np.zeros(len(ranked))
    chosen: list[int] = []
    left = list(range(len(ranked)))
    while left and len(chosen) < k:
        values = lam * scores[left] - (1 - lam) * redundancy[left]
        best = left[int(np.argmax(values))]  # argmax takes the first of ties: the better-ranked
        ranked[best].score = float(lam * scores[best] - (1 - lam) * redundancy[best])
        chosen.append(best)
        left.remove(best)
        redundancy = np.maximum(redundancy, vectors @ vectors[best])
    return [ranked[i] for i in chosen]


def within_budget(ranked: list[Candidate], budget_tokens: int) -> list[Candidate]:
    """Docs in rank order while they fit the budget (a doc that does not fit is skipped, smaller
    ones after it may still fit); when none fits, the best one is returned alone."""
    kept: list[Candidate] = []
    used = 0
    for c in ranked:
        tokens = math.ceil(len(c.text) / CHARS_PER_TOKEN)
        if used + tokens <= budget_tokens:
            kept.append(c)
            used += tokens
    if not kept and ranked:
        kept = ranked[:1]
    return kept
