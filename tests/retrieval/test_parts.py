"""The retrieval parts on their own: embedding cache, FAISS index, FTS5 BM25, fusion."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from backends.retrieval import bm25, fusion
from backends.retrieval.cache import EmbeddingCache, embed_documents
from backends.retrieval.vector import VectorIndex
from orchestrator.plugin_api import MemoryStoreError

# --- embedding cache -------------------------------------------------------------------------

def test_cache_embeds_each_text_once_per_model(tmp_path, counting_embedder):
    cache = EmbeddingCache(tmp_path / "cache.sqlite3")
    first = embed_documents(counting_embedder, ["alpha beta", "gamma", "alpha beta"], cache)
    assert counting_embedder.embedded == ["alpha beta", "gamma"]  # the repeat is not re-embedded
    again = embed_documents(counting_embedder, ["gamma", "alpha beta", "delta"], cache)
    assert counting_embedder.embedded == ["alpha beta", "gamma", "delta"]
    assert np.allclose(again[1], first[0]) and np.allclose(again[0], first[1])
    # Another model id is another key space: nothing is shared with it.
    other = type(counting_embedder)("counting-v2")
    embed_documents(other, ["gamma"], cache)
    assert other.embedded == ["gamma"]


def test_unusable_cache_is_skipped_not_fatal(tmp_path, counting_embedder):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    cache = EmbeddingCache(blocker / "cache.sqlite3")  # parent is a file: cannot be created
    vectors = embed_documents(counting_embedder, ["alpha"], cache)
    assert vectors.shape == (1, 384)


# --- FAISS vector index ----------------------------------------------------------------------

def unit(rows: list[list[float]]) -> np.ndarray:
    v = np.asarray(rows, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_vector_index_search_delete_save_load(tmp_path):
    index = VectorIndex(3)
    index.add(np.array([10, 20, 30]), unit([[1, 0, 0], [0, 1, 0], [1, 1, 0]]))
    ids, scores = index.search(unit([[1, 0.1, 0]])[0], 2)
    assert ids == [10, 30] and scores[0] > scores[1]
    assert index.remove([10, 99]) == 1
    assert index.search(unit([[1, 0, 0]])[0], 5)[0] == [30, 20]
    path = tmp_path / "v.faiss"
    index.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["v.faiss"]  # no temp file left behind
    loaded = VectorIndex.load(path)
    assert len(loaded) == 2 and loaded.search(unit([[0, 1, 0]])[0], 1)[0] == [20]
    with pytest.raises(MemoryStoreError, match="size 4"):
        loaded.add(np.array([1]), np.ones((1, 4), dtype=np.float32))


def test_corrupt_vector_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "v.faiss"
    bad.write_bytes(b"not faiss")
    with pytest.raises(MemoryStoreError, match="rebuilt"):
        VectorIndex.load(bad)


# --- BM25 through FTS5 -----------------------------------------------------------------------

@pytest.fixture
def fts():
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize='{bm25.FTS_TOKENIZE}')")
    docs = ["The workers were running the nightly exports", "A café in Zürich",
            "To be, or not to be: that is the question", "Deploy scripts need NEAR-zero downtime",
            "Unrelated note about lunch"]
    conn.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", enumerate(docs, 1))
    return conn


def test_bm25_stems_and_folds_diacritics(fts):
    assert [i for i, _ in bm25.search(fts, "t", "runs export", 5)] == [1]
    assert [i for i, _ in bm25.search(fts, "t", "cafe zurich", 5)] == [2]


def test_bm25_query_of_only_stop_words_still_searches(fts):
    assert bm25.query_terms("to be or not to be") == ["to", "be", "or", "not"]
    assert bm25.search(fts, "t", "to be or not to be", 5)[0][0] == 3
    assert bm25.query_terms("the of and lunch") == ["lunch"]


@pytest.mark.parametrize("query", ['"unbalanced', "NEAR(deploy", "deploy AND OR NOT", "col:x*",
                                   "-- ; DROP TABLE t", "\x00\x07 control", "🚀🔥", ""])
def test_bm25_any_text_is_a_safe_query(fts, query):
    results = bm25.search(fts, "t", query, 5)  # FTS5 syntax in the text must not raise
    assert all(score > 0 for _, score in results)
    assert fts.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 5


# --- fusion ----------------------------------------------------------------------------------

def test_weighted_fusion_normalises_each_list():
    dense = [(1, 0.9), (2, 0.5), (3, 0.1)]
    sparse = [(3, 40.0), (4, 10.0)]
    fused = dict(fusion.weighted_sum(dense, sparse, 0.5))
    assert fused == pytest.approx({1: 0.5, 2: 0.5 * 0.5, 3: 0.5, 4: 0.0})
    assert [i for i, _ in fusion.weighted_sum(dense, sparse, 1.0)][:3] == [1, 2, 3]


def test_rrf_rewards_agreement_and_scales_to_one():
    fused = fusion.reciprocal_rank([(1, 0.9), (2, 0.8)], [(2, 5.0), (1, 1.0)])
    assert fused[0][1] <= 1.0
    top = fusion.reciprocal_rank([(7, 1.0)], [(7, 1.0)])
    assert top == [(7, pytest.approx(1.0))]
    with pytest.raises(ValueError):
        fusion.fuse("max", [], [])


def test_code_terms_read_a_long_word_in_linear_time(monkeypatch):
    """The identifier pattern backtracks over a run of word characters, so it only ever sees runs
    an identifier can be: one 100,000-character word (a pasted hash dump) cost minutes before and
    held the GIL for every other request. (The time itself: `middle bench words`.)"""
    seen: list[int] = []
    pattern = bm25._IDENT

    class Recording:
        def finditer(self, text):
            seen.append(len(text))
            return pattern.finditer(text)

    monkeypatch.setattr(bm25, "_IDENT", Recording())
    blob = "deadbeef" * 12_500
    terms = bm25.code_terms(f"see datasette/views/table.py and {blob} in CsvExport")
    assert max(seen) <= bm25.MAX_IDENT_CHARS
    assert terms[:2] == ["datasetteviewstablepy", "tablepy"] and "csvexport" in terms
    assert not any(len(t) > bm25.MAX_IDENT_CHARS for t in terms)  # the blob itself gives no term


def test_code_terms_are_those_of_the_pattern_run_on_the_whole_text():
    import random
    import string

    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "_./:- \n,()é"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        assert list(bm25._identifiers(text)) == [m.group() for m in bm25._IDENT.finditer(text)], text
