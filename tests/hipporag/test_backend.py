"""The hipporag backend: exact deletion, incremental synonymy, PageRank, persistence, bad stores."""

from __future__ import annotations

import sqlite3

import networkx as nx
import numpy as np
import pytest

from backends.hipporag import HippoRAGBackend
from backends.hipporag.export import render, to_networkx
from backends.hipporag.graph import Graph, personalized_pagerank
from backends.retrieval.mirror import IndexMirror
from orchestrator.plugin_api import ConfigError, MemoryStoreError

# Overlapping names, so entities are shared between docs and synonymy has work to do. A low
# threshold and two neighbours per entity make lists fill up, so deletes must refill them.
A = [
    "Alice Smith joined Acme Corp in Berlin in 2019.",
    "Acme Corp moved its Berlin office to Hamburg Harbour in 2021.",
    "Bob Jones fixed the Payment Webhook for Acme Corporation.",
    "The Payment Webhook retried requests from Hamburg.",
]
B = [
    "Alice Smyth and Bob Jones met Carol King in Berlin Mitte.",
    "Carol King founded Acme Corp Labs in Hamburg Harbour.",
]
GRAPHY = {"synonymy_threshold": 0.3, "synonymy_max_neighbours": 2}
QUERIES = ["Where did Alice Smith work?", "Who fixed the Payment Webhook?", "Hamburg office move",
           "Carol King", "nothing in common xyzzy"]


def snapshot(backend: HippoRAGBackend) -> dict:
    """The graph by content (names, not row ids): equal for equal memories."""
    with backend.read() as conn:
        names = dict(conn.execute("SELECT id, name FROM entities"))
        return {
            "entities": sorted(names.values()),
            "facts": sorted((names[s], p, names[o]) for s, p, o in conn.execute(
                "SELECT subject, predicate, object FROM facts")),
            "fact_edges": sorted((tuple(sorted((names[a], names[b]))), w) for a, b, w in
                                 conn.execute("SELECT a, b, weight FROM fact_edges")),
            "synonyms": sorted((names[a], names[b], s) for a, b, s in conn.execute(
                "SELECT entity, neighbour, score FROM synonyms")),
            "passage_entities": sorted((t, names[e]) for t, e in conn.execute(
                "SELECT p.text, pe.entity FROM passage_entities pe JOIN passages p ON p.id = pe.passage")),
        }


def test_delete_leaves_exactly_the_store_that_never_held_the_doc(open_backend):
    both = open_backend("both", **GRAPHY)
    both.index(A[:2])
    both.index(B + A[2:])  # B interleaved with A, so row ids differ from the A-only store
    assert snapshot(both)["synonyms"], "the test needs synonymy edges to mean something"
    alone = open_backend("alone", **GRAPHY)
    alone.index(A)
    assert both.delete(B) == 2
    assert snapshot(both) == snapshot(alone)
    assert both.retrieve(QUERIES, 10) == alone.retrieve(QUERIES, 10)
    assert both.list_docs() == alone.list_docs() == A


def test_synonymy_lists_do_not_depend_on_insertion_order(open_backend):
    forward = open_backend("forward", **GRAPHY)
    for doc in A + B:
        forward.index([doc])
    backward = open_backend("backward", **GRAPHY)
    backward.index(list(reversed(A + B)))
    assert snapshot(forward)["synonyms"] == snapshot(backward)["synonyms"]
    assert snapshot(forward)["fact_edges"] == snapshot(backward)["fact_edges"]


def test_adding_docs_searches_only_for_the_new_entities(open_backend, monkeypatch):
    backend = open_backend(**GRAPHY)
    backend.index(A + B)
    searched: list = []
    original = IndexMirror.search

    def spy(self, vector, k):
        searched.append(k)
        return original(self, vector, k)

    monkeypatch.setattr(IndexMirror, "search", spy)
    backend.index(["Zed Quimby visited Acme Corp."])  # one new entity (Zed Quimby)
    # The new entity's own list plus the widening search for lists it may join: a handful, not
    # one per stored entity.
    assert 1 <= len(searched) <= 4
    searched.clear()
    backend.index(["Zed Quimby visited Acme Corp."])  # re-indexing the same text: a no-op
    assert searched == []


def test_reindexing_the_same_text_changes_nothing(open_backend):
    backend = open_backend()
    backend.index(A)
    with backend.read() as conn:
        before = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    backend.index(A + [A[0]])
    with backend.read() as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone() == before


def test_ppr_matches_networkx_personalized_pagerank(open_backend):
    backend = open_backend(**GRAPHY)
    backend.index(A + B)
    with backend.read() as conn:
        graph = Graph.load(conn)
    rng = np.random.default_rng(3)
    seeds = np.where(rng.random(graph.adjacency.shape[0]) < 0.3, rng.random(graph.adjacency.shape[0]), 0)
    seeds[0] = 1.0
    ours = personalized_pagerank(graph, seeds, 0.5, 200, 1e-12)
    nxg = nx.from_scipy_sparse_array(graph.adjacency)
    nxg.add_nodes_from(range(graph.adjacency.shape[0]))
    theirs = nx.pagerank(nxg, alpha=0.5, personalization=dict(enumerate(seeds)),
                         weight="weight", tol=1e-13, max_iter=1000)
    assert np.allclose(ours, [theirs[i] for i in range(len(ours))], atol=1e-6)  # float32
    assert ours.sum() == pytest.approx(1.0, abs=1e-5)


def test_graph_ranking_reaches_a_passage_through_an_entity(open_backend):
    # The query names Carol King; only the second hop (Carol King -> Acme Corp Labs) holds
    # Hamburg Harbour. Dense similarity alone would not rank the hop above the distractors.
    backend = open_backend()
    docs = ["Carol King founded Acme Corp Labs.", "Acme Corp Labs is based in Hamburg Harbour.",
            "Where is the harbour? Many harbours are in many cities.",
            "Cities with harbours are often based near rivers."]
    backend.index(docs)
    (result,) = backend.retrieve(["Where is the company Carol King founded based?"], 2)
    assert result["docs"] == docs[:2]


def test_without_facts_ranking_falls_back_to_dense(open_backend):
    backend = open_backend()
    docs = ["it was so good to see you", "we had so much fun today"]  # no names, no phrases
    backend.index(docs)
    assert snapshot(backend)["facts"] == [] and snapshot(backend)["entities"] == []
    (result,) = backend.retrieve(["we had fun"], 2)
    assert result["docs"] == [docs[1], docs[0]]
    assert result["doc_scores"][0] > result["doc_scores"][1]


def test_reopened_store_gives_identical_results(open_backend):
    first = open_backend(**GRAPHY)
    first.index(A + B)
    first.delete([B[0]])
    expected = first.retrieve(QUERIES, 5)
    first.close()
    assert open_backend(**GRAPHY).retrieve(QUERIES, 5) == expected


def test_store_keeps_its_embedder_and_synonymy_options(open_backend):
    open_backend().index(A)
    with pytest.raises(ConfigError, match="synonymy"):
        open_backend(synonymy_threshold=0.9)
    reopened = open_backend(embedder="auto")  # "auto" means: the store's own
    assert reopened.embedder.model_id.startswith("hashing")


def test_newer_format_version_is_refused(open_backend, tmp_path):
    open_backend().index(A).__class__  # noqa: B018 - create the store
    with sqlite3.connect(tmp_path / "store" / "hipporag.sqlite3") as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'format_version'")
    with pytest.raises(MemoryStoreError, match="format version 99, newer"):
        HippoRAGBackend(tmp_path / "store", {"embedder": "hashing"})


def test_corrupt_store_file_is_a_clear_error(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "hipporag.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(MemoryStoreError, match=str(store / "hipporag.sqlite3")):
        HippoRAGBackend(store, {"embedder": "hashing"})


def test_strict_options():
    with pytest.raises(ConfigError, match="no_such"):
        HippoRAGBackend._coerce({"no_such": 1})
    with pytest.raises(ConfigError, match="openie"):
        HippoRAGBackend._coerce({"openie": "magic"})
    opts = HippoRAGBackend.Options()
    assert (opts.fact_top_k, opts.passage_node_weight, opts.damping, opts.synonymy_threshold) \
        == (5, 0.05, 0.5, 0.8)


def test_empty_and_odd_inputs(open_backend):
    backend = open_backend()
    assert backend.retrieve(["", "anything"], 3) == [
        {"question": "", "docs": [], "doc_scores": []},
        {"question": "anything", "docs": [], "doc_scores": []}]
    docs = ["", "   ", "Ctrl\x00\x07chars with Alice", "only lower case"]
    backend.index(docs)
    assert backend.list_docs() == docs
    (result,) = backend.retrieve([""], 10)
    assert sorted(result["docs"]) == sorted(docs)
    assert backend.retrieve(["Alice"], 0)[0]["docs"] == []


def test_graph_export_as_graphml_and_json(open_backend):
    backend = open_backend(**GRAPHY)
    backend.index(A + ["Control\x01char Entity Name here."])
    graph = to_networkx(backend)
    kinds = {d["kind"] for _, _, d in graph.edges(data=True)}
    assert kinds == {"fact", "synonym", "passage"}
    assert graph.nodes["entity:acme corp"]["passages"] == 2  # A[0], A[1]
    parsed = nx.parse_graphml(render(graph, "graphml"))
    assert parsed.number_of_nodes() == graph.number_of_nodes()
    assert parsed.number_of_edges() == graph.number_of_edges()
    import json

    data = json.loads(render(to_networkx(backend, passages=False), "json"))
    assert all(n["kind"] == "entity" for n in data["nodes"])


def test_index_records_takes_the_text_of_records(open_backend):
    from backends.retrieval import MemoryRecord

    backend = open_backend()
    backend.index_records([MemoryRecord(A[0], timestamp=1.0e9), MemoryRecord(A[1], importance=5)])
    assert backend.list_docs() == A[:2]
    with pytest.raises(TypeError):
        backend.index_records([object()])
    assert backend.list_docs() == A[:2]


def test_a_broken_vector_row_is_a_clear_error_naming_the_store(open_backend, tmp_path):
    open_backend().index(A)
    path = tmp_path / "store" / "hipporag.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE passage_chunks SET vec = x'0102' WHERE id = 256")
    with pytest.raises(MemoryStoreError, match=str(path)):
        open_backend().retrieve(["Alice"], 3)


def test_matrix_mirror_appends_removes_and_merges_in_id_order():
    from backends.retrieval.mirror import MatrixMirror

    mirror = MatrixMirror("passage_vectors", "p")
    rows = {i: np.full(3, float(i), dtype=np.float32) for i in range(1, 30)}

    def add(ids):
        mirror._add(np.asarray(ids, dtype=np.int64), np.vstack([rows[i] for i in ids]))

    add([1, 2, 3])
    for i in range(4, 20):  # appends, growing the buffer
        add([i])
    mirror._remove(np.asarray([2, 7, 99]))
    add([7, 25])  # out of order: merged
    expected = [i for i in range(1, 20) if i != 2] + [25]
    assert mirror.ids.tolist() == expected
    assert mirror.matrix[:, 0].tolist() == [float(i) for i in expected]
    assert mirror.scores(np.ones(3, dtype=np.float32)).tolist() == [3.0 * i for i in expected]


def test_top_keeps_ties_in_id_order_at_the_cut():
    from backends.hipporag.backend import _top

    ids = np.array([10, 11, 12, 13, 14, 15])
    scores = np.array([0.5, 0.9, 0.5, 0.1, 0.5, 0.9], dtype=np.float32)
    assert _top(ids, scores, 3) == [(11, pytest.approx(0.9)), (15, pytest.approx(0.9)),
                                    (10, pytest.approx(0.5))]
    assert [i for i, _ in _top(ids, scores, 10)] == [11, 15, 10, 12, 14, 13]


def test_a_name_the_query_contains_ranks_its_doc_first(open_backend):
    """`middle memory search Carol` once ranked the only doc naming Carol last: facts that
    merely resemble the query outweighed the name itself."""
    backend = open_backend(embedder="minilm")
    docs = ["Ticket: Add login page. Users sign in with email. Changed: app/login.py",
            "Ticket: Fix CSV export. Export failed on unicode. Changed: app/export.py",
            "Carol asked for a dark mode toggle in settings.",
            "Ticket: Speed up search. Added an index on title. Changed: app/db.py",
            "Ticket: Refactor settings. Moved config to settings.toml. Changed: app/settings.py"]
    for doc in docs:
        backend.index([doc])
    for query in ("Carol", "What did Carol ask for?"):
        assert backend.retrieve([query], 5)[0]["docs"][0] == docs[2]
    assert backend.retrieve(["app/export.py"], 5)[0]["docs"][0] == docs[1]
    assert backend.retrieve(["settings.toml"], 5)[0]["docs"][0] == docs[4]


def test_offers_to_near_alike_names_are_read_and_written_a_batch_at_a_time(open_backend, monkeypatch):
    """New entities offered to the lists of many stored ones (near-alike names: "Task N",
    "src/fN.py") cost one read per chunk of owners, not one or more statements per offer (500
    docs into a store of 500 made 454,154 offers, minutes on PostgreSQL); the lists stay those
    of a store built in one call."""
    from backends.hipporag.writer import GraphWriter

    docs = [f"Ticket: Task {i}. Changed module m{i} and file src/f{i}.py." for i in range(40)]
    backend = open_backend("two", synonymy_threshold=0.3)
    backend.index(docs[:20])
    statements: list[str] = []
    real_init = GraphWriter.__init__

    def traced(self, conn, *args, **kwargs):  # every statement the write runs (sqlite3's own trace)
        conn.set_trace_callback(statements.append)
        real_init(self, conn, *args, **kwargs)

    monkeypatch.setattr(GraphWriter, "__init__", traced)
    backend.index(docs[20:])
    monkeypatch.undo()
    reads = [s for s in statements if "FROM synonyms s JOIN entities" in s]
    assert 1 <= len(reads) <= 2, len(reads)
    one = open_backend("one", synonymy_threshold=0.3)
    one.index(docs)
    assert snapshot(backend)["synonyms"] == snapshot(one)["synonyms"]
