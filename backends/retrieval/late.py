"""Late interaction (MaxSim): a reranker that matches every query token against every doc token.

Every other signal hybrid has scores a query and a doc each as one vector (or as bags of words),
so a doc whose one relevant passage sits among unrelated lines is diluted. Late interaction
(ColBERT, Khattab and Zaharia 2020; BERTScore, Zhang et al. 2020) keeps the contextual state of
each token: a query token's score is its best cosine to any doc token, and the doc's score is
their mean over the query's tokens (how much of the query the doc covers, wherever it says it).
No PyPI wheel ships a cross-encoder's weights (docs/memory-benchmarks.md, "Fifth try"), so this
reads the token states of the model the store already uses (MiniLM's, `token_states`): nothing
new is installed or downloaded, and nothing is fitted.

Two orders of a candidate pool (HybridOptions.rerank): `maxsim` puts the pool in the order of
this score alone, as a cross-encoder reranker would; `maxsim-rrf` fuses that order with the fused
list's own by reciprocal rank (1/(60 + rank) each, Cormack et al. 2009's constant, hybrid's
rrf_k default), so a doc both orders rank high stays high.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from orchestrator.plugin_api import ConfigError

from .embedders import Embedder

RERANKS = ("maxsim", "maxsim-rrf")
RRF_K = 60  # Cormack et al. 2009; the rank constant hybrid's own rrf fusion uses
# Doc token states kept between queries, counted in tokens (float16, 384 dimensions: 768 bytes a
# token): a candidate pool repeats most of its docs from one ticket to the next, and a doc's
# model pass is most of the cost. 300,000 tokens (about 230 MB) hold a 2,000-doc history whole.
CACHE_TOKENS = 300_000


class LateScorer:
    """MaxSim scores of docs for a query from one embedder's token states; docs' states are
    cached by (model, text) for the process (see CACHE_TOKENS)."""

    def __init__(self, embedder: Embedder):
        if embedder.token_states("") is None:
            raise ConfigError(
                f"rerank needs a model that gives token states, and the embedder "
                f"{embedder.model_id!r} gives none: set [memory.options] embedder = \"minilm\" "
                "(the default), or unset rerank")
        self.embedder = embedder

    def states(self, text: str) -> np.ndarray:
        """The unit token states (tokens, d) of text as the model reads a document (its first
        window, without [CLS] and [SEP]); (0, d) for a text with no tokens."""
        key = (self.embedder.model_id, hashlib.sha256(text.encode("utf-8")).digest())
        held = _cache.get(key)
        if held is not None:
            return held
        got = self.embedder.token_states(text)
        assert got is not None  # checked in __init__
        rows = got.states.astype(np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        rows = (rows / np.where(norms > 0, norms, 1.0)).astype(np.float16)
        _cache.put(key, rows)
        return rows

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Per text, the mean over the query's tokens of the best cosine to any of its tokens
        (in [-1, 1]); 0 for every text when the query has no tokens, and for a text with none."""
        q = self.states(query).astype(np.float32)
        out = np.zeros(len(texts), dtype=float)
        if not len(q):
            return out
        for n, text in enumerate(texts):
            d = self.states(text)
            if len(d):
                out[n] = float((q @ d.astype(np.float32).T).max(axis=1).mean())
        return out


def reorder(ranked: list[tuple[int, float]], late: np.ndarray, how: str) -> list[tuple[int, float]]:
    """The pool `ranked` (best first) in the order `how` names, each id with the score it was
    put in order by (the MaxSim score, or the reciprocal-rank sum scaled to [0, 1]); a tie
    keeps the pool's order."""
    if how not in RERANKS:
        raise ConfigError(f"rerank {how!r}: use one of {', '.join(RERANKS)}")
    if how == "maxsim":
        scored = [(i, float(s)) for (i, _), s in zip(ranked, late)]
    else:
        by_late = {n: r for r, n in enumerate(sorted(range(len(ranked)), key=lambda n: (-late[n], n)))}
        best = 2.0 / (RRF_K + 1)
        scored = [(i, (1.0 / (RRF_K + 1 + n) + 1.0 / (RRF_K + 1 + by_late[n])) / best)
                  for n, (i, _) in enumerate(ranked)]
    order = sorted(range(len(scored)), key=lambda n: (-scored[n][1], n))
    return [scored[n] for n in order]


class _TokenCache:
    """Least recently used doc token states, bounded by their total tokens."""

    def __init__(self, limit: int):
        self.limit = limit
        self.tokens = 0
        self._held: OrderedDict[tuple[str, bytes], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, bytes]) -> np.ndarray | None:
        with self._lock:
            rows = self._held.get(key)
            if rows is not None:
                self._held.move_to_end(key)
            return rows

    def put(self, key: tuple[str, bytes], rows: np.ndarray) -> None:
        with self._lock:
            if key in self._held:
                return
            self._held[key] = rows
            self.tokens += len(rows)
            while self.tokens > self.limit and len(self._held) > 1:
                _, old = self._held.popitem(last=False)
                self.tokens -= len(old)


_cache = _TokenCache(CACHE_TOKENS)
