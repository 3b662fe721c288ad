"""Embedding cache keyed by (model id, sha256 of the model's input), shared by stores and benchmarks."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from backends.storage import end_interrupted
from orchestrator.plugin_api import cache_dir  # noqa: F401 - re-exported as retrieval.cache_dir

from .embedders import Embedder

log = logging.getLogger("middle.retrieval.cache")

CACHE_ENV = "MIDDLE_AGENT_CACHE_DIR"  # the variable that moves cache_dir() (tests set it)

_CHUNK = 500  # keys per SELECT: below SQLite's bound-parameter limit
_PUT_EVERY = 64  # texts embedded between cache writes


def open_cache_db(path: Path, what: str, setup: Sequence[str]) -> sqlite3.Connection | None:
    """A best-effort cache file (WAL, autocommit, shared by threads) after its `setup` statements;
    None, with a warning, when it cannot be opened: a cache never fails the work it speeds up."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        for statement in setup:
            conn.execute(statement)
        return conn
    except (sqlite3.Error, OSError) as exc:
        log.warning("%s cache %s unusable (%s); going on without a cache", what, path, exc)
        return None


class EmbeddingCache:
    """Document vectors in one SQLite file. Best effort: a cache that cannot be read or written
    is logged and skipped, never fails an index."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = open_cache_db(self.path, "embedding", [
            "PRAGMA synchronous=NORMAL",
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, key BLOB NOT NULL, "
            "vec BLOB NOT NULL, PRIMARY KEY (model, key)) WITHOUT ROWID"])

    def get(self, model: str, keys: Sequence[bytes], dim: int | None) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        if self._conn is None or not keys:
            return found
        try:
            with self._lock:
                for start in range(0, len(keys), _CHUNK):
                    chunk = list(keys[start:start + _CHUNK])
                    marks = ",".join("?" * len(chunk))
                    rows = self._conn.execute(
                        f"SELECT key, vec FROM vectors WHERE model = ? AND key IN ({marks})",
                        [model, *chunk],
                    ).fetchall()
                    for key, blob in rows:
                        vec = np.frombuffer(blob, dtype=np.float32)
                        if dim is None or vec.shape[0] == dim:
                            found[bytes(key)] = vec
        except sqlite3.Error as exc:
            log.warning("Embedding cache %s read failed (%s); re-embedding", self.path, exc)
        return found

    def put(self, model: str, items: Sequence[tuple[bytes, np.ndarray]]) -> None:
        if self._conn is None or not items:
            return
        try:
            with self._lock:
                end_interrupted(self._conn)  # one Ctrl-C cut between BEGIN and COMMIT
                self._conn.execute("BEGIN")
                try:
                    self._conn.executemany(
                        "INSERT OR IGNORE INTO vectors (model, key, vec) VALUES (?, ?, ?)",
                        [(model, key, np.asarray(vec, dtype=np.float32).tobytes())
                         for key, vec in items],
                    )
                finally:
                    self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            log.warning("Embedding cache %s write failed (%s)", self.path, exc)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_shared: dict[str, EmbeddingCache] = {}
_shared_lock = threading.Lock()


def shared_cache(path: Path | None = None) -> EmbeddingCache:
    """One cache object per file per process."""
    path = Path(path) if path is not None else cache_dir() / "embeddings.sqlite3"
    with _shared_lock:
        key = str(path.resolve())
        if key not in _shared:
            _shared[key] = EmbeddingCache(path)
        return _shared[key]


def embed_documents(embedder: Embedder, texts: Sequence[str],
                    cache: EmbeddingCache | None) -> np.ndarray:
    """Document vectors, from the cache where present; new ones are embedded and cached."""
    inputs = embedder.document_inputs(texts)
    if cache is None or not embedder.cacheable or not inputs:
        return embedder.embed_inputs(inputs)
    keys = [hashlib.sha256(s.encode("utf-8", "surrogatepass")).digest() for s in inputs]
    found = cache.get(embedder.model_id, keys, embedder.dimension)
    missing = list(dict.fromkeys(k for k in keys if k not in found))
    by_key = dict(zip(keys, inputs))
    for start in range(0, len(missing), _PUT_EVERY):  # saved as we go: an interrupted run keeps them
        chunk = missing[start:start + _PUT_EVERY]
        fresh = embedder.embed_inputs([by_key[k] for k in chunk])
        cache.put(embedder.model_id, list(zip(chunk, fresh)))
        found.update(zip(chunk, fresh))
    return np.vstack([found[k] for k in keys]).astype(np.float32, copy=False)
