"""The PageRank graph follows the change log: after any writes, by this or another instance, it
equals a graph read afresh from SQLite, and catching up reads only what changed."""

from __future__ import annotations

import numpy as np
from test_backend import GRAPHY, A, B

from backends.hipporag.graph import Graph, GraphMirror

MORE = [
    "Dana Scott reviewed the Payment Webhook with Bob Jones in Hamburg.",
    "Eve Adams moved Acme Corp Labs from Hamburg Harbour to Berlin Mitte.",
    "The Berlin office of Acme Corp hired Dana Scott in 2022.",
]


def assert_same(ours: Graph, fresh: Graph) -> None:
    assert ours.entity_names == fresh.entity_names
    for field in ("entity_ids", "passage_ids", "fact_ids", "fact_subject", "fact_object",
                  "passages_per_entity", "inv_degree", "dangling"):
        assert np.array_equal(getattr(ours, field), getattr(fresh, field)), field
    assert ours.fact_predicate == fresh.fact_predicate
    assert (ours.adjacency != fresh.adjacency).nnz == 0
    assert np.array_equal(ours.adjacency.indptr, fresh.adjacency.indptr)
    assert np.array_equal(ours.adjacency.indices, fresh.adjacency.indices)
    assert np.array_equal(ours.adjacency.data, fresh.adjacency.data)


def test_the_graph_follows_writes_and_deletes_from_two_instances(open_backend, monkeypatch):
    reader = open_backend(**GRAPHY)
    writer = open_backend(**GRAPHY)  # the same store: another instance (as another process)
    full_loads: list[int] = []
    original = GraphMirror.load_all

    def counting(self, conn):
        full_loads.append(1)
        return original(self, conn)

    monkeypatch.setattr(GraphMirror, "load_all", counting)
    steps = [("index", reader, A[:2]), ("index", writer, B), ("index", reader, A[2:]),
             ("delete", writer, [B[0]]), ("index", writer, MORE), ("delete", reader, [A[1], MORE[0]]),
             ("index", reader, [A[1]]), ("delete", writer, B[1:] + MORE[1:])]
    reader.retrieve(["Acme"], 3)
    for op, backend, docs in steps:
        getattr(backend, op)(docs)
        reader.retrieve(["Acme"], 3)  # the reader catches up through the change log
        with reader.read() as conn:
            fresh = Graph.load(conn)
        assert_same(reader._graph.graph, fresh)
    # The reader loaded in full once (on open); every later change came from the log.
    assert len(full_loads) == len(steps) + 1  # + one per step: the fresh graphs compared
    assert reader.list_docs() == A[:1] + A[2:] + [A[1]]
