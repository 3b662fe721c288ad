"""Fixtures for the hindsight tests: a private embedding cache and banks to open."""

from __future__ import annotations

import pytest

from backends.hindsight import HindsightBackend
from backends.retrieval.cache import CACHE_ENV


@pytest.fixture(autouse=True)
def _private_embedding_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.getbasetemp() / "embedding-cache"))


@pytest.fixture
def open_bank(tmp_path):
    """open_bank(**options) -> a hashing-embedder backend on tmp_path/bank (closed afterwards)."""
    opened: list[HindsightBackend] = []

    def factory(llm=None, path=None, **options) -> HindsightBackend:
        options.setdefault("embedder", "hashing")
        backend = HindsightBackend(path or tmp_path / "bank", options, llm)
        opened.append(backend)
        return backend

    yield factory
    for backend in opened:
        backend.close()
