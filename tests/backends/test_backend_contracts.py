"""The backend contract suite run over the built-in backends and the in-memory fake."""

from __future__ import annotations

import pytest

from backends.none import NoneBackend
from backends.sliding_window import SlidingWindowBackend
from orchestrator.testing import InMemoryBackend, MemoryBackendContract


class TestSlidingWindowContract(MemoryBackendContract):
    relevance_ranked = False  # it returns the newest summary and docs, whatever the query
    process_factory = "backends.sliding_window:SlidingWindowBackend"

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

