"""Backends and the facade's advisory lock on the PostgreSQL database a test names in
MIDDLE_TEST_MEMORY_URL: importable by dotted path, so spawned processes (standing for other
machines) open the same store. The store directory's name is the project id."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from backends.bm25 import Bm25Backend
from backends.dense import DenseBackend
from backends.hindsight import HindsightBackend
from backends.hipporag import HippoRAGBackend
from backends.hybrid import HybridBackend
from backends.sliding_window import SlidingWindowBackend
from orchestrator.memory.lock import AdvisoryLocks
from orchestrator.plugin_api import MemoryDatabase

URL_ENV = "MIDDLE_TEST_MEMORY_URL"


def database(store_dir: Path) -> MemoryDatabase:
    return MemoryDatabase(os.environ[URL_ENV], Path(store_dir).name)


def hybrid(store_dir: Path, **options: Any) -> HybridBackend:
    """The hybrid backend with default options (the offline MiniLM) on the test database."""
    return HybridBackend(store_dir, options, database=database(store_dir))


def hybrid_hashing(store_dir: Path) -> HybridBackend:
    return hybrid(store_dir, embedder="hashing")


def dense_hashing(store_dir: Path) -> DenseBackend:
    return DenseBackend(store_dir, {"embedder": "hashing"}, database=database(store_dir))


def bm25(store_dir: Path) -> Bm25Backend:
    return Bm25Backend(store_dir, {}, database=database(store_dir))


def hipporag(store_dir: Path) -> HippoRAGBackend:
    """HippoRAG on the no-model embedder (fast)."""
    return HippoRAGBackend(store_dir, {"embedder": "hashing"}, database=database(store_dir))


def hindsight(store_dir: Path) -> HindsightBackend:
    return HindsightBackend(store_dir, {"embedder": "hashing"}, database=database(store_dir))


def sliding_window(store_dir: Path) -> SlidingWindowBackend:
    return SlidingWindowBackend(store_dir, {}, database=database(store_dir))


class ProjectLock:
    """The memory facade's advisory lock on the project, as a reusable context manager."""

    def __init__(self, store_dir: Path):
        self.project = Path(store_dir).name
        self.locks = AdvisoryLocks(os.environ[URL_ENV], timeout_s=120)
        self._held: list[Any] = []

    def __enter__(self) -> None:
        held = self.locks.hold(self.project, "test")
        held.__enter__()
        self._held.append(held)

    def __exit__(self, *exc: Any) -> None:
        self._held.pop().__exit__(*exc)
