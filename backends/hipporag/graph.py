"""The PageRank graph as a cached SciPy sparse matrix, and Personalized PageRank by power iteration."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import numpy as np
from scipy import sparse


def _ints(conn: sqlite3.Connection, sql: str, columns: int) -> np.ndarray:
    rows = conn.execute(sql).fetchall()
    return np.array(rows, dtype=np.int64).reshape(len(rows), columns)


@dataclass
class Graph:
    """Nodes: entities (sorted by name), then passages (by id). Sorting by content rather than
    row ids makes a store that lost a passage identical to one that never had it."""

    entity_ids: np.ndarray  # entity id of each entity node
    entity_names: list[str]
    passage_ids: np.ndarray  # ascending; passage node = n_entities + position
    fact_ids: np.ndarray  # ascending (the fact vector mirror's order)
    fact_subject: np.ndarray  # entity node of each fact's subject
    fact_object: np.ndarray
    fact_predicate: list[str]
    passages_per_entity: np.ndarray
    adjacency: sparse.csr_matrix  # symmetric weights
    inv_degree: np.ndarray  # 1 / weighted degree, 0 for nodes without edges
    dangling: np.ndarray  # bool: nodes without edges

    @property
    def n_entities(self) -> int:
        return len(self.entity_ids)

    def fact_key(self, i: int) -> tuple[str, str, str]:
        return (self.entity_names[self.fact_subject[i]], self.fact_predicate[i],
                self.entity_names[self.fact_object[i]])

    @classmethod
    def load(cls, conn: sqlite3.Connection) -> Graph:
        """Read nodes and edges in one read transaction (the caller's)."""
        ents = conn.execute("SELECT id, name FROM entities ORDER BY name").fetchall()
        entity_ids = np.array([r[0] for r in ents], dtype=np.int64)
        names = [r[1] for r in ents]
        order = np.argsort(entity_ids)
        by_id = entity_ids[order]

        def node(ids: np.ndarray) -> np.ndarray:
            return order[np.searchsorted(by_id, ids)] if len(ids) else ids

        n_ent = len(entity_ids)
        passage_ids = _ints(conn, "SELECT id FROM passages ORDER BY id", 1)[:, 0]
        n = n_ent + len(passage_ids)

        pe = _ints(conn, "SELECT passage, entity FROM passage_entities", 2)
        pe_p = n_ent + np.searchsorted(passage_ids, pe[:, 0])
        pe_e = node(pe[:, 1])
        fe = _ints(conn, "SELECT a, b, weight FROM fact_edges", 3)
        syn = conn.execute("SELECT entity, neighbour, score FROM synonyms").fetchall()
        sa = node(np.array([r[0] for r in syn], dtype=np.int64))
        sb = node(np.array([r[1] for r in syn], dtype=np.int64))
        sw = np.array([r[2] for r in syn], dtype=np.float64)
        if len(syn):  # a pair in both lists is one edge
            lo, hi = np.minimum(sa, sb), np.maximum(sa, sb)
            _, first = np.unique(lo * n + hi, return_index=True)
            sa, sb, sw = lo[first], hi[first], sw[first]

        rows = np.concatenate([pe_p, node(fe[:, 0]), sa])
        cols = np.concatenate([pe_e, node(fe[:, 1]), sb])
        weights = np.concatenate([np.ones(len(pe_p)), fe[:, 2].astype(np.float64), sw])
        coo = sparse.coo_matrix((np.concatenate([weights, weights]),
                                 (np.concatenate([rows, cols]), np.concatenate([cols, rows]))),
                                shape=(n, n))
        adjacency = coo.tocsr()  # sums duplicates: a fact edge that is also a synonymy edge
        adjacency.sort_indices()
        degree = np.asarray(adjacency.sum(axis=1)).ravel()
        dangling = degree <= 0
        inv_degree = np.where(dangling, 0.0, 1.0 / np.where(dangling, 1.0, degree))
        # float32 halves the memory each PageRank step streams through; ranks stay comparable.
        adjacency = adjacency.astype(np.float32)
        inv_degree = inv_degree.astype(np.float32)

        facts = conn.execute("SELECT id, subject, object, predicate FROM facts ORDER BY id").fetchall()
        return cls(
            entity_ids=entity_ids, entity_names=names, passage_ids=passage_ids,
            fact_ids=np.array([r[0] for r in facts], dtype=np.int64),
            fact_subject=node(np.array([r[1] for r in facts], dtype=np.int64)),
            fact_object=node(np.array([r[2] for r in facts], dtype=np.int64)),
            fact_predicate=[r[3] for r in facts],
            passages_per_entity=np.bincount(pe_e, minlength=n_ent).astype(np.float64),
            adjacency=adjacency, inv_degree=inv_degree, dangling=dangling)


def personalized_pagerank(graph: Graph, seeds: np.ndarray, damping: float, max_iterations: int,
                          tolerance: float) -> np.ndarray:
    """r = (1 - d) s + d (W D^-1 r), with the mass of dangling nodes sent back to the seeds
    (float32, as the matrix)."""
    total = seeds.sum()
    if total <= 0:
        return np.zeros_like(seeds)
    reset = (seeds / total).astype(np.float32)
    rank = reset.copy()
    dangling = np.flatnonzero(graph.dangling)
    for _ in range(max_iterations):
        spread = graph.adjacency @ (rank * graph.inv_degree)
        new = np.float32(damping) * spread \
            + np.float32(damping * float(rank[dangling].sum()) + 1 - damping) * reset
        change = float(np.abs(new - rank).sum())
        rank = new
        if change < tolerance:
            break
    return rank
