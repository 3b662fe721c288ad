"""Whole documents: a long doc is embedded as overlapping chunks and found by any of them; the
embedding cache holds each chunk; a store built before chunking is refused with a hint until
`middle memory reindex` re-embeds it (SQLite files and PostgreSQL alike), also with another
process writing."""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from backends.dense.backend import DenseBackend
from backends.hipporag.backend import HippoRAGBackend
from backends.hybrid.backend import HybridBackend
from backends.retrieval import FORMAT_VERSION as RETRIEVAL_VERSION
from backends.retrieval import chunking
from backends.retrieval.cache import CACHE_ENV
from backends.retrieval.embedders import HashingEmbedder, MiniLMEmbedder, minilm
from backends.retrieval.embedders.base import clip_text
from orchestrator.memory.facade import MemoryFacade
from orchestrator.memory.stores import reindex
from orchestrator.plugin_api import MemoryDatabase, MemoryStoreError
from orchestrator.plugins.manager import PluginRegistry

V1_STORE = Path(__file__).parent / "data" / "v1_store"  # made by middle-agent before chunking
PROJECT = "demo"
HASHING = {"embedder": "hashing"}

needs_minilm = pytest.mark.skipif(not minilm.available(), reason="MiniLM is not installed")

FILLER = ("We went over the release schedule, the flaky integration tests and who reviews the "
          "dashboard changes this week, then the new hire's onboarding and the office move. ")
DECISION = ("In the end we decided that the cache key must include the locale: two users with "
            "different languages were being served each other's rendered pages.")
LONG_CHAT = "User: a few things from the standup. " + FILLER * 20 + DECISION
DECOYS = [
    "Ticket: cache the rendered sidebar for anonymous visitors. Changed: web/sidebar.py",
    "Ticket: evict stale entries from the page cache every hour. Changed: web/cache.py",
    "Ticket: translate the settings page into German. Changed: locale/de.po",
    "Ticket: fix the login redirect loop. Changed: app/login.py",
]
QUERY = "Users see pages rendered in another language: the cached page ignores the language."


@pytest.fixture(autouse=True)
def _private_embedding_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "embedding-cache"))


# --- the chunks ------------------------------------------------------------------------------

@needs_minilm
def test_a_short_doc_is_one_chunk_embedded_as_before():
    embedder = MiniLMEmbedder()
    doc = "Ticket:  fix the login\nredirect loop.  Changed: app/login.py"
    assert chunking.chunks(embedder, doc) == [clip_text(doc)]


@needs_minilm
def test_a_long_doc_is_cut_in_overlapping_windows_the_model_reads_whole():
    embedder = MiniLMEmbedder()
    parts = chunking.chunks(embedder, LONG_CHAT)
    assert len(parts) >= 3
    for part in parts:
        assert len(embedder.word_pieces(part)) <= chunking.WINDOW_TOKENS
    words = clip_text(LONG_CHAT).split()
    # every word is read whole by some chunk, and each chunk begins inside the one before it
    assert all(any(w in part.split() for part in parts) for w in words)
    for before, after in zip(parts, parts[1:]):
        assert after.split()[0] in before.split()[-40:]
    assert DECISION.split()[-1] in parts[-1].split()


def test_embedders_without_a_tokenizer_are_cut_by_words():
    embedder = HashingEmbedder()
    doc = " ".join(f"w{i}" for i in range(500))
    parts = chunking.chunks(embedder, doc)
    assert [len(p.split()) for p in parts][0] == chunking.WINDOW_WORDS
    assert parts[-1].split()[-1] == "w499"
    assert '"unit": "words"' in chunking.scheme(embedder)


# --- a long doc is found by what it says past its opening -------------------------------------

@needs_minilm
@pytest.mark.parametrize("cls", [DenseBackend, HybridBackend])
def test_a_long_doc_is_found_by_a_decision_at_its_end(tmp_path, cls):
    backend = cls(tmp_path, {"embedder": "minilm"} if cls is DenseBackend
                  else {"embedder": "minilm", "recency_weight": 0.0})
    backend.index(DECOYS + [LONG_CHAT])
    ranked = backend.retrieve([QUERY], 3)[0]["docs"]
    backend.close()
    assert ranked[0] == LONG_CHAT, ranked


@needs_minilm
def test_hipporag_embeds_a_long_passage_whole_as_dense_does(tmp_path):
    """hipporag's passage vectors (the dense seed of its PageRank) are the same chunk vectors:
    its facts and entities were already read from the whole text (token-state windows)."""
    dense = DenseBackend(tmp_path / "dense", {"embedder": "minilm"})
    dense.index([LONG_CHAT])
    expected = dense._store.vectors([1])[1]
    dense.close()
    graph = HippoRAGBackend(tmp_path / "hipporag", {"embedder": "minilm", "recency_weight": 0.0})
    graph.index(DECOYS + [LONG_CHAT])
    assert LONG_CHAT in graph.retrieve([QUERY], 3)[0]["docs"]
    graph.close()
    with sqlite3.connect(tmp_path / "hipporag" / "hipporag.sqlite3") as conn:
        pid = conn.execute("SELECT id FROM passages WHERE text = ?", (LONG_CHAT,)).fetchone()[0]
        rows = conn.execute("SELECT vec FROM passage_chunks WHERE id >= ? AND id < ? ORDER BY id",
                            (pid * 256, (pid + 1) * 256)).fetchall()
    stored = np.vstack([np.frombuffer(v, dtype=np.float32) for (v,) in rows])
    assert len(expected) > 1 and np.allclose(stored, expected, atol=1e-6)


@needs_minilm
def test_the_embedding_cache_holds_each_chunk(tmp_path):
    backend = DenseBackend(tmp_path / "a", {"embedder": "minilm", "embedding_cache": True})
    backend.index([LONG_CHAT])
    stored = backend._store.vectors([1])[1]
    backend.close()
    parts = chunking.chunks(MiniLMEmbedder(), LONG_CHAT)
    assert stored.shape == (len(parts), 384)
    with sqlite3.connect(tmp_path / "embedding-cache" / "embeddings.sqlite3") as conn:
        cached = [np.frombuffer(v, dtype=np.float32) for (v,) in conn.execute("SELECT vec FROM vectors")]
    assert len(cached) == len(parts)
    assert all(any(np.array_equal(c, s) for c in cached) for s in stored)
    # another store of the same doc reads every chunk from the cache: the same vectors
    again = DenseBackend(tmp_path / "b", {"embedder": "minilm", "embedding_cache": True})
    again.index([LONG_CHAT])
    assert np.array_equal(again._store.vectors([1])[1], stored)
    again.close()


def test_deleting_a_long_doc_removes_every_chunk(tmp_path):
    backend = HybridBackend(tmp_path, HASHING)
    backend.index(DECOYS + [LONG_CHAT * 3])
    assert backend.delete([LONG_CHAT * 3]) == 1
    with sqlite3.connect(tmp_path / "hybrid.sqlite3") as conn:
        assert conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == len(DECOYS)
    assert LONG_CHAT * 3 not in backend.retrieve([DECISION], 5)[0]["docs"]
    backend.close()


@needs_minilm
def test_hindsight_reads_a_long_doc_whole(tmp_path):
    """hindsight needed no change: its facts are every sentence of the doc (grouped past
    max_facts_per_doc), their vectors pooled from token-state windows over the whole text."""
    from backends.hindsight.backend import HindsightBackend

    bank = HindsightBackend(tmp_path, {"embedder": "minilm"})
    bank.index(DECOYS + [LONG_CHAT])
    assert bank.retrieve([QUERY], 3)[0]["docs"][0] == LONG_CHAT
    bank.close()


# --- a store built before chunking ------------------------------------------------------------

def _old_store(save_dir: Path, backend: str) -> Path:
    store = save_dir / PROJECT
    store.mkdir(parents=True)
    shutil.copy(V1_STORE / f"{backend}.sqlite3", store / f"{backend}.sqlite3")
    return store


def _facade(save_dir: Path, backend: str) -> MemoryFacade:
    return MemoryFacade(save_dir, backend, HASHING, PluginRegistry(load_entry_points=False))


@pytest.mark.parametrize("backend", ["hybrid", "dense", "hipporag"])
def test_an_old_store_is_refused_with_a_hint_until_reindexed(tmp_path, backend):
    _old_store(tmp_path, backend)
    mem = _facade(tmp_path, backend)
    for call in (lambda: mem.retrieve(PROJECT, ["cache key locale"], 3),
                 lambda: mem.index(PROJECT, ["a new note"])):
        with pytest.raises(MemoryStoreError) as caught:
            call()
        assert f"middle memory reindex --from {backend}" in str(caught.value)
        assert "before documents were embedded whole" in str(caught.value)
    report = reindex(mem, PROJECT, backend)
    assert report.copied == 3 and report.backup is not None
    found = mem.retrieve(PROJECT, ["the cache key must include the locale"], 1)[0]["docs"]
    assert found[0].startswith("Chat about the cache layer.")
    mem.index(PROJECT, ["a new note"])
    assert len(mem.list_docs(PROJECT)) == 4
    mem.close()
    docs, time, chunks, version = (("passages", "created_at", "passage_chunks", "3")
                                   if backend == "hipporag" else ("docs", "doc_time", "chunks", str(RETRIEVAL_VERSION)))
    with sqlite3.connect(tmp_path / PROJECT / f"{backend}.sqlite3") as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        assert meta["format_version"] == version
        view = chunking.PROSE if backend == "hybrid" else chunking.TEXT
        assert meta["chunking"] == chunking.scheme(HashingEmbedder(), view)
        assert conn.execute(f"SELECT COUNT(*) FROM {chunks}").fetchone()[0] >= 4
        kept = [t for (t,) in conn.execute(f"SELECT {time} FROM {docs} ORDER BY {time}")][:3]
    assert kept == [1_700_000_000 + 3600 * i for i in range(3)]  # the docs' times survive


def _live_writer(save_dir: str, backend: str, refused, go, out) -> None:
    """Another process with the old store open: refused, then (after the reindex it did not
    run) writing and finding its own doc."""
    mem = _facade(Path(save_dir), backend)
    result: list[str] = []
    try:
        try:
            mem.index(PROJECT, ["written before the reindex"])
            result.append("accepted")
        except MemoryStoreError as exc:
            result.append("refused" if "middle memory reindex" in str(exc) else repr(exc))
        refused.set()
        go.wait(120)
        mem.index(PROJECT, ["the deploy checklist lives in docs/deploy.md"])
        result.append(mem.retrieve(PROJECT, ["where is the deploy checklist"], 1)[0]["docs"][0])
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        result.append(repr(exc))
    finally:
        mem.close()
        out.put(result)


def test_a_reindex_beside_a_live_process_migrates_it_too(tmp_path):
    _old_store(tmp_path, "hybrid")
    ctx = multiprocessing.get_context("spawn")
    refused, go, out = ctx.Event(), ctx.Event(), ctx.Queue()
    writer = ctx.Process(target=_live_writer, args=(str(tmp_path), "hybrid", refused, go, out))
    writer.start()
    try:
        assert refused.wait(120), "the other process did not open the store"
        mem = _facade(tmp_path, "hybrid")
        reindex(mem, PROJECT, "hybrid")
        mem.close()
    finally:
        go.set()
    result = out.get(timeout=120)
    writer.join(60)
    assert result == ["refused", "the deploy checklist lives in docs/deploy.md"]
    check = _facade(tmp_path, "hybrid")
    assert len(check.list_docs(PROJECT)) == 4
    check.close()


def test_an_old_postgres_store_is_refused_then_reembedded_in_place(tmp_path, pg_url):
    import psycopg

    mem = MemoryFacade(tmp_path, "hybrid", HASHING, PluginRegistry(load_entry_points=False),
                       url=pg_url)
    mem.index(PROJECT, DECOYS + [LONG_CHAT])
    mem.close()
    # What a store written before chunking holds: docs, a single vector each, no chunking.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO retrieval_vectors (id, store_id, embedding) SELECT doc_id, "
                     "store_id, embedding FROM retrieval_chunks WHERE chunk = 0")
        conn.execute("DELETE FROM retrieval_chunks")
        conn.execute("DELETE FROM retrieval_meta WHERE key = 'chunking'")
    other = HybridBackend(tmp_path / "other", HASHING, database=MemoryDatabase(pg_url, PROJECT))
    with pytest.raises(MemoryStoreError) as caught:
        other.retrieve([QUERY], 3)
    assert "middle memory reindex --from hybrid" in str(caught.value)
    mem = MemoryFacade(tmp_path, "hybrid", HASHING, PluginRegistry(load_entry_points=False),
                       url=pg_url)
    report = reindex(mem, PROJECT, "hybrid")
    assert report.copied == len(DECOYS) + 1
    assert LONG_CHAT in mem.retrieve(PROJECT, [DECISION], 3)[0]["docs"]
    mem.close()
    # the instance that was open all along (another machine) sees the migration at once
    assert LONG_CHAT in other.retrieve([DECISION], 3)[0]["docs"]
    other.close()
    with psycopg.connect(pg_url) as conn:
        chunks = conn.execute("SELECT count(*) FROM retrieval_chunks").fetchone()[0]
    assert chunks == len(DECOYS) + len(chunking.chunks(HashingEmbedder(), LONG_CHAT))


def test_postgres_tables_of_schema_1_are_migrated_to_hold_chunks(tmp_path, pg_url):
    import psycopg

    from backends import pg_database

    HybridBackend(tmp_path, HASHING, database=MemoryDatabase(pg_url, PROJECT)).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the tables as schema 1 made them
        conn.execute("DROP TABLE retrieval_chunks")
        conn.execute("UPDATE retrieval_schema SET version = 1")
    backend = HybridBackend(tmp_path, HASHING, database=MemoryDatabase(pg_url, PROJECT))
    backend.index([LONG_CHAT])
    assert backend.retrieve([DECISION], 1)[0]["docs"] == [LONG_CHAT]
    backend.close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM retrieval_schema").fetchall() == [
            (pg_database.SCHEMA_VERSION,)]


# --- the prose view: hybrid embeds a doc without its file paths (its BM25 half reads them) -----

CHANGED = "Ticket: Facet by many-to-many. Changed: datasette/facets.py, tests/test_facets.py, docs/facets.rst"


def test_hybrids_vectors_read_a_docs_prose_and_bm25_its_paths(tmp_path, minilm_calls):
    backend = HybridBackend(tmp_path, {"embedder": "minilm", "embedding_cache": False})
    backend.index([CHANGED, "Ticket: Fix a typo in the README."])
    # its paths and their commas left out; a doc with no path is read as it is
    assert minilm_calls == ["Ticket: Facet by many-to-many. Changed:", "Ticket: Fix a typo in the README."]
    assert backend.retrieve(["tests/test_facets.py"], 1)[0]["docs"] == [CHANGED]  # through BM25
    assert backend.retrieve(["facet on a many to many relation"], 1)[0]["docs"] == [CHANGED]
    backend.close()


def test_dense_alone_reads_the_paths_too(tmp_path, minilm_calls):
    """Without a lexical half, the paths in its vectors are all dense has to match them by."""
    backend = DenseBackend(tmp_path, {"embedder": "minilm", "embedding_cache": False})
    backend.index([CHANGED])
    assert minilm_calls == [CHANGED]
    backend.close()


def test_a_store_whose_vectors_read_the_whole_text_is_refused_until_reindexed(tmp_path):
    mem = _facade(tmp_path, "hybrid")
    mem.index(PROJECT, [CHANGED])
    mem.close()
    with sqlite3.connect(tmp_path / PROJECT / "hybrid.sqlite3") as conn:  # as the release before wrote it
        conn.execute("UPDATE meta SET value = ? WHERE key = 'chunking'", (chunking.scheme(HashingEmbedder()),))
    mem = _facade(tmp_path, "hybrid")
    with pytest.raises(MemoryStoreError) as caught:
        mem.retrieve(PROJECT, ["facets"], 1)
    assert "with vectors that read its docs' whole text, file paths too, where hybrid now reads their prose" \
        in str(caught.value) and "middle memory reindex --from hybrid" in str(caught.value)
    reindex(mem, PROJECT, "hybrid")
    assert mem.retrieve(PROJECT, ["facets"], 1)[0]["docs"] == [CHANGED]
    mem.close()


def test_a_damaged_chunking_record_is_refused_by_name_until_reindexed(tmp_path):
    mem = _facade(tmp_path, "hybrid")
    mem.index(PROJECT, [CHANGED])
    mem.close()
    store = tmp_path / PROJECT / "hybrid.sqlite3"
    with sqlite3.connect(store) as conn:  # the record is read as data, never run
        conn.execute("UPDATE meta SET value = ? WHERE key = 'chunking'", ('{"view": [1, {"__class__": "os.system"}',))
    mem = _facade(tmp_path, "hybrid")
    with pytest.raises(MemoryStoreError) as caught:
        mem.index(PROJECT, ["another note"])
    assert str(store) in str(caught.value) and "middle memory reindex --from hybrid" in str(caught.value)
    reindex(mem, PROJECT, "hybrid")
    mem.index(PROJECT, ["another note"])
    assert mem.retrieve(PROJECT, ["facets"], 1)[0]["docs"] == [CHANGED]
    mem.close()
