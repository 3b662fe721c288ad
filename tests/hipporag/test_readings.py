"""fact_vectors = "passage": a passage read once gives its vector and its entities' and facts'
vectors; the store records the kind; a delete re-reads so the store is as if the doc never was."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from backends.hipporag import HippoRAGBackend
from backends.hipporag.extract import extract_offline, normalise
from backends.retrieval.embedders import make_embedder, minilm
from orchestrator.plugin_api import ConfigError

needs_minilm = pytest.mark.skipif(not minilm.available(), reason="the offline MiniLM is not installed")

TICKET = ("Ticket: Fix CSV export for row tables. The --csv option in datasette/views/table.py "
          "raised KeyError when Simon ran it.\nChanged: datasette/views/table.py, tests/test_csv.py")
A = ["Alice Smith joined Acme Corp in Berlin in 2019.",
     "Acme Corp moved its Berlin office to Hamburg Harbour in 2021.",
     "Bob Jones fixed the Payment Webhook for Acme Corporation.",
     "The Payment Webhook retried requests from Hamburg."]
# B[1] states A[2]'s facts too: written first, it is their earliest holder until deleted.
B = ["Alice Smyth and Bob Jones met Carol King in Berlin Mitte.",
     "Carol King founded Acme Corp Labs. Bob Jones fixed the Payment Webhook for Acme Corporation."]
MINILM = {"embedder": "minilm", "synonymy_threshold": 0.5, "synonymy_max_neighbours": 2}


def vectors(backend: HippoRAGBackend) -> dict:
    """Every stored vector and synonymy edge by content (names, not row ids)."""
    with backend.read() as conn:
        names = dict(conn.execute("SELECT id, name FROM entities"))
        return {
            "entities": {names[i]: bytes(v) for i, v in conn.execute(
                "SELECT id, vec FROM entity_vectors")},
            "facts": {(names[s], p, names[o]): bytes(v) for s, p, o, v in conn.execute(
                "SELECT f.subject, f.predicate, f.object, v.vec FROM facts f JOIN fact_vectors v "
                "ON v.id = f.id")},
            "passages": {t: bytes(v) for t, v in conn.execute(
                "SELECT p.text, v.vec FROM passages p JOIN passage_chunks v ON v.id = p.id * 256")},
            "synonyms": sorted((names[a], names[b], s) for a, b, s in conn.execute(
                "SELECT entity, neighbour, score FROM synonyms")),
        }


def test_the_offline_extractor_says_where_each_fact_and_entity_is_stated():
    ex = extract_offline(TICKET)
    assert len(ex.evidence) == len(ex.triples) and set(ex.mentions) == set(ex.entities)
    for (subject, _, obj), ranges in zip(ex.triples, ex.evidence):
        read = normalise(" ".join(TICKET[a:b] for a, b in ranges))
        assert subject in read and obj in read
    for name, ranges in ex.mentions.items():
        assert [normalise(TICKET[a:b]) for a, b in ranges] == [name]
    sentence = next(r for t, r in zip(ex.triples, ex.evidence) if t[2] == "keyerror")
    assert [TICKET[a:b] for a, b in sentence] == ["datasette/views/table.py raised KeyError"]


def test_a_new_store_records_passage_vectors_and_keeps_them(open_backend):
    open_backend().index(A)
    assert open_backend().fact_vectors == "passage"  # "auto" on a new store
    with pytest.raises(ConfigError, match="reindex --from hipporag"):
        open_backend(fact_vectors="text")
    empty = open_backend("empty")
    assert open_backend("empty", fact_vectors="text").fact_vectors == "text"  # nothing stored
    empty.close()


def test_a_version_1_store_goes_on_with_facts_embedded_alone(open_backend, tmp_path):
    open_backend(fact_vectors="text").index(A)
    path = tmp_path / "store" / "hipporag.sqlite3"
    with sqlite3.connect(path) as conn:  # as written before the kind was recorded
        conn.execute("DELETE FROM meta WHERE key = 'fact_vector_kind'")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'format_version'")
    with pytest.raises(ConfigError, match="holds fact vectors of kind 'text'"):
        open_backend(fact_vectors="passage")
    reopened = open_backend()
    assert reopened.fact_vectors == "text"
    reopened.index(B)
    assert set(reopened.list_docs()) == set(A + B)
    with sqlite3.connect(path) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
    assert meta["format_version"] == "3" and meta["fact_vector_kind"] == "text"


@needs_minilm
def test_a_passage_is_read_once_and_its_parts_pooled_from_that_pass(open_backend, minilm_calls):
    calls = minilm_calls
    backend = open_backend(embedder="minilm")
    doc = "Alice Smith fixed the Payment Webhook in Berlin. Hamburg Harbour got a KeyError."
    backend.index([doc])
    assert calls == []  # no model call beside the passage's own pass
    model = make_embedder("minilm")
    stored = vectors(backend)
    assert stored["passages"][doc] == model.embed_documents([doc])[0].tobytes()
    names = sorted(stored["entities"])
    assert len(names) >= 4 and stored["facts"]
    alone = model.embed_documents(names)
    for n, name in enumerate(names):
        read = np.frombuffer(stored["entities"][name], dtype=np.float32)
        assert np.isclose(np.linalg.norm(read), 1.0, atol=1e-5)
        assert int(np.argmax(alone @ read)) == n, f"{name!r} is nearest another name"


@needs_minilm
def test_delete_leaves_the_vectors_of_a_store_that_never_held_the_doc(open_backend):
    both = open_backend("both", **MINILM)
    both.index(B[:1])
    both.index(A[:2])
    both.index(B[1:] + A[2:])
    alone = open_backend("alone", **MINILM)
    alone.index(A)
    before = vectors(both)
    assert before["synonyms"], "the test needs synonymy edges to mean something"
    assert before["entities"]["bob jones"] != vectors(alone)["entities"]["bob jones"]
    assert both.delete(B) == 2
    assert vectors(both) == vectors(alone)  # read again from A[2], their earliest holder now
    queries = ["Who fixed the Payment Webhook?", "Hamburg office move", "Alice Smith"]
    assert both.retrieve(queries, 4) == alone.retrieve(queries, 4)


INDEXER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from backends.hipporag import HippoRAGBackend
    backend = HippoRAGBackend(Path(sys.argv[1]), {"embedder": "minilm"})
    for line in sys.stdin.read().split("\\n---\\n"):
        backend.index([line])
    backend.close()
""")


@needs_minilm
def test_two_processes_reading_the_same_docs_store_the_same_vectors(tmp_path):
    docs = "\n---\n".join([TICKET, *A, *B])
    for name in ("one", "two"):
        subprocess.run([sys.executable, "-c", INDEXER, str(tmp_path / name)], input=docs,
                       text=True, check=True, timeout=120)
    one = HippoRAGBackend(tmp_path / "one", {"embedder": "minilm"})
    two = HippoRAGBackend(tmp_path / "two", {"embedder": "minilm"})
    try:
        assert vectors(one) == vectors(two)
    finally:
        one.close()
        two.close()


@needs_minilm
def test_facts_and_names_embedded_alone_stay_so_through_a_delete(open_backend):
    backend = open_backend(**MINILM, fact_vectors="text")
    backend.index(B[1:] + A)
    backend.delete(B[1:])  # the earliest holder of A[2]'s names goes: nothing to re-read
    stored = vectors(backend)["entities"]
    names = sorted(stored)
    alone = make_embedder("minilm").embed_documents(names)
    assert [stored[n] for n in names] == [v.tobytes() for v in alone]


@needs_minilm
def test_a_cached_reading_is_the_reading_and_costs_no_model_pass(open_backend, monkeypatch):
    model = make_embedder("minilm")
    warm = open_backend("warm", **{**MINILM, "embedding_cache": True})
    warm.warm_embeddings(A)
    passes: list[str] = []
    original = minilm.MiniLMEmbedder.token_states_many
    monkeypatch.setattr(minilm.MiniLMEmbedder, "token_states_many",
                        lambda self, wanted: passes.extend(t for t, _ in wanted) or original(self, wanted))
    warm.index(A)
    assert passes == []
    fresh = open_backend("fresh", **{**MINILM, "embedding_cache": False})
    fresh.index(A)
    assert len(passes) == len(A) and vectors(warm) == vectors(fresh)
    assert vectors(warm)["passages"][A[0]] == model.embed_documents([A[0]])[0].tobytes()
