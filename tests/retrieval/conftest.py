"""Fixtures for the retrieval tests: a private embedding cache, and a counting embedder."""

from __future__ import annotations

import numpy as np
import pytest

from backends.retrieval.cache import CACHE_ENV
from backends.retrieval.embedders import HashingEmbedder


@pytest.fixture(autouse=True)
def _private_embedding_cache(tmp_path_factory, monkeypatch):
    # One cache per session: off the user's ~/.cache, and MiniLM vectors are embedded once.
    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.getbasetemp() / "embedding-cache"))


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, cacheable, counting the texts it really embeds."""

    cacheable = True

    def __init__(self, model_id: str = "counting-v1"):
        super().__init__()
        self.model_id = model_id
        self.embedded: list[str] = []

    def _embed(self, texts: list[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return super()._embed(texts)


@pytest.fixture
def counting_embedder() -> CountingEmbedder:
    return CountingEmbedder()
