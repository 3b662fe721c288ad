"""The backend contract suite run over the built-in backends and the in-memory fake."""

from __future__ import annotations

import outside_sql  # tests/outside_sql.py
import pytest

from backends.bm25 import Bm25Backend
from backends.dense import DenseBackend
from backends.hindsight import HindsightBackend
from backends.hybrid import HybridBackend
from backends.none import NoneBackend
from backends.sliding_window import SlidingWindowBackend
from orchestrator.testing import InMemoryBackend, MemoryBackendContract


def sqlite_writer(backend: str):
    """The contract's `outside_writer` for a derived backend's SQLite file: the sqlite3 shell's
    write, in a process of its own (outside_sql)."""
    def write(store_dir, op, old, new):
        outside_sql.write(str(store_dir / f"{backend}.sqlite3"), backend, op, old, new)
    return write


class TestSlidingWindowContract(MemoryBackendContract):
    relevance_ranked = False  # it returns the newest summary and docs, whatever the query
    process_factory = "backends.sliding_window:SlidingWindowBackend"

    @pytest.fixture
    def outside_writer(self):
        return sqlite_writer("sliding_window")

    @pytest.fixture
    def backend_factory(self):
        return lambda store_dir: SlidingWindowBackend(store_dir, SlidingWindowBackend.Options())


class TestNoneContract(MemoryBackendContract):
    stores_docs = False
    supports_delete = False
    persistent = False

    @pytest.fixture
    def backend_factory(self):
        return lambda store_dir: NoneBackend(store_dir, NoneBackend.Options())


class TestInMemoryContract(MemoryBackendContract):
    writes_to_disk = False  # its store is a dict in this process

    @pytest.fixture
    def backend_factory(self):
        return lambda store_dir: InMemoryBackend(store_dir, InMemoryBackend.Options())


@pytest.fixture(autouse=True)
def _private_embedding_cache(tmp_path_factory, monkeypatch):
    # Vectors are cached by (model, text hash); one cache per test session keeps them off the
    # user's ~/.cache and lets the contract runs of dense and hybrid share the sample docs' vectors.
    from backends.retrieval.cache import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.getbasetemp() / "embedding-cache"))


class TestBm25Contract(MemoryBackendContract):
    process_factory = "backends.bm25:Bm25Backend"

    @pytest.fixture
    def backend_factory(self):
        return lambda store_dir: Bm25Backend(store_dir, Bm25Backend.Options())


class TestHybridContract(MemoryBackendContract):
    """Default options: the offline MiniLM ONNX model really run, FTS5, fusion, the default
    pipeline stages. Fewer "many docs" than the default 500 to keep embedding time down."""

    many_docs_count = 120
    process_docs_per_thread = 6
    process_factory = "backends.hybrid:HybridBackend"
    leftover_temp_file = "hybrid.g1.faiss.k1ll3d.tmp"  # a snapshot write cut short

    @pytest.fixture
    def backend_factory(self):
        return lambda store_dir: HybridBackend(store_dir, HybridBackend.Options())


def hashing_dense(store_dir):
    """The dense backend on the no-model embedder (fast); hybrid runs the real model above."""
    return DenseBackend(store_dir, DenseBackend.Options(embedder="hashing"))


class TestDenseContract(MemoryBackendContract):
    # Default options here (MiniLM in each process): the hybrid class above has already put these
    # docs' vectors in the session's embedding cache.
    process_factory = "backends.dense:DenseBackend"
    process_docs_per_thread = 6
    leftover_temp_file = "dense.g1.faiss.k1ll3d.tmp"

    @pytest.fixture
    def backend_factory(self):
        return hashing_dense


class TestHybridAllStagesContract(MemoryBackendContract):
    """Every optional stage on, with the no-model embedder (fast): RRF, MMR, threshold, budget."""

    many_docs_count = 200

    @pytest.fixture
    def backend_factory(self):
        options = HybridBackend.Options(
            embedder="hashing", fusion="rrf", mmr_lambda=0.7, relevance_threshold=0.01,
            token_budget=400_000, dedup_threshold=0.999)
        return lambda store_dir: HybridBackend(store_dir, options)


def hashing_hipporag(store_dir):
    """The hipporag backend on the no-model embedder (fast); its process test runs the default."""
    from backends.hipporag import HippoRAGBackend

    return HippoRAGBackend(store_dir, HippoRAGBackend.Options(embedder="hashing"))


class TestHippoRAGContract(MemoryBackendContract):
    """Offline extractor, graph and PageRank on the hashing embedder; the two-process test opens
    the backend with its default options (offline MiniLM ONNX, no LLM, no network)."""

    process_factory = "backends.hipporag:HippoRAGBackend"
    process_docs_per_thread = 6

    @pytest.fixture
    def outside_writer(self):
        return sqlite_writer("hipporag")

    @pytest.fixture
    def backend_factory(self):
        return hashing_hipporag


class TestHindsightContract(MemoryBackendContract):
    """The no-model embedder here (fast); the process test opens the default options (MiniLM,
    whose vectors of these docs the hybrid class has cached) in fresh interpreters."""

    process_factory = "backends.hindsight:HindsightBackend"
    process_docs_per_thread = 6

    @pytest.fixture
    def outside_writer(self):
        return sqlite_writer("hindsight")

    @pytest.fixture
    def backend_factory(self):
        return lambda store_dir: HindsightBackend(store_dir, HindsightBackend.Options(embedder="hashing"))

