"""The PageRank graph as a SciPy sparse matrix kept in step with the store's change log, and
Personalized PageRank by power iteration."""

from __future__ import annotations

import bisect
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from backends.storage import CHUNK
from orchestrator.plugin_api import MemoryStoreError

if TYPE_CHECKING:
    from scipy import sparse

_EMPTY = np.zeros(0, dtype=np.int64)


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

    def entity_node(self, name: str) -> int | None:
        """The node of the entity with exactly this (normalised) name, if any."""
        i = bisect.bisect_left(self.entity_names, name)
        return i if i < len(self.entity_names) and self.entity_names[i] == name else None

    @classmethod
    def load(cls, conn: sqlite3.Connection) -> Graph:
        """Read every node and edge in the caller's read transaction."""
        mirror = GraphMirror()
        mirror.load_all(conn)
        return mirror.build()


def _rows(conn: sqlite3.Connection, sql: str, ids: Iterable[int]) -> list[tuple]:
    """sql has one `{}` for an IN list (used once or twice); rows for all ids, chunked."""
    ids = sorted(ids)
    out: list[tuple] = []
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        marks = ",".join("?" * len(chunk))
        out += conn.execute(sql.replace("{}", marks), chunk * sql.count("{}")).fetchall()
    return out


def _ints(rows: list[tuple], columns: int) -> np.ndarray:
    return np.array(rows, dtype=np.int64).reshape(len(rows), columns)


class GraphMirror:
    """Nodes and edges as of a generation. A write logs what it touched (passages 'p', entity
    nodes 'n', edges between entities 'g', facts 'f'), so catching up re-reads only those rows
    instead of the whole graph; the matrix is then rebuilt in memory from the arrays.
    Equal contents give an identical matrix, whichever way they were reached."""

    def __init__(self) -> None:
        self.gen: int | None = None
        self.graph: Graph | None = None
        self._entities: dict[int, str] = {}
        self._passages = _EMPTY
        self._pe = np.zeros((0, 2), dtype=np.int64)  # passage, entity
        self._fe = np.zeros((0, 3), dtype=np.int64)  # a, b, weight
        self._syn = np.zeros((0, 2), dtype=np.int64)  # entity, neighbour (each list's rows)
        self._syn_scores = np.zeros(0, dtype=np.float64)
        self._facts = np.zeros((0, 3), dtype=np.int64)  # id, subject, object (ids ascending)
        self._predicates: dict[int, str] = {}

    def sync(self, store, conn: sqlite3.Connection) -> Graph:
        """The graph at the store's current generation (full reload when too far behind)."""
        gen, floor = store.generation(conn)
        if self.gen == gen and self.graph is not None:
            return self.graph
        if self.gen is None or self.gen < floor or self.gen > gen:
            self.load_all(conn)
        else:
            self._apply(conn, self.gen, gen)
        self.graph, self.gen = self.build(), gen
        return self.graph

    def invalidate(self) -> None:
        self.gen, self.graph = None, None

    # --- reading ----------------------------------------------------------------------------

    def load_all(self, conn: sqlite3.Connection) -> None:
        self._entities = dict(conn.execute("SELECT id, name FROM entities"))
        self._passages = _ints(conn.execute("SELECT id FROM passages ORDER BY id").fetchall(), 1)[:, 0]
        self._pe = _ints(conn.execute("SELECT passage, entity FROM passage_entities").fetchall(), 2)
        self._fe = _ints(conn.execute("SELECT a, b, weight FROM fact_edges").fetchall(), 3)
        self._set_synonyms(conn.execute("SELECT entity, neighbour, score FROM synonyms").fetchall())
        facts = conn.execute("SELECT id, subject, object, predicate FROM facts ORDER BY id").fetchall()
        self._facts = _ints([f[:3] for f in facts], 3)
        self._predicates = {f[0]: f[3] for f in facts}

    def _set_synonyms(self, rows: list[tuple]) -> None:
        self._syn = _ints([r[:2] for r in rows], 2)
        self._syn_scores = np.array([r[2] for r in rows], dtype=np.float64)

    def _apply(self, conn: sqlite3.Connection, since: int, upto: int) -> None:
        touched: dict[str, set[int]] = {"p": set(), "n": set(), "g": set(), "f": set()}
        for kind, i in conn.execute("SELECT DISTINCT kind, id FROM changes WHERE gen > ? AND "
                                    "gen <= ? AND kind IN ('p', 'n', 'g', 'f')", (since, upto)):
            touched[kind].add(i)
        if touched["n"]:
            for i in touched["n"]:
                self._entities.pop(i, None)
            self._entities.update(_rows(conn, "SELECT id, name FROM entities WHERE id IN ({})",
                                        touched["n"]))
        if touched["p"]:
            p = np.fromiter(touched["p"], dtype=np.int64)
            kept = self._passages[~np.isin(self._passages, p)]
            present = _ints(_rows(conn, "SELECT id FROM passages WHERE id IN ({})", p.tolist()), 1)[:, 0]
            self._passages = np.union1d(kept, present)
            fresh = _ints(_rows(conn, "SELECT passage, entity FROM passage_entities WHERE passage "
                                      "IN ({})", p.tolist()), 2)
            self._pe = np.vstack([self._pe[~np.isin(self._pe[:, 0], p)], fresh])
        if touched["g"]:
            g = np.fromiter(touched["g"], dtype=np.int64)
            keep = ~(np.isin(self._fe[:, 0], g) | np.isin(self._fe[:, 1], g))
            fresh_edges = set(_rows(conn, "SELECT a, b, weight FROM fact_edges WHERE a IN ({}) OR "
                                          "b IN ({})", touched["g"]))
            self._fe = np.vstack([self._fe[keep], _ints(sorted(fresh_edges), 3)])
            keep = ~(np.isin(self._syn[:, 0], g) | np.isin(self._syn[:, 1], g))
            kept_syn = list(zip(self._syn[keep, 0].tolist(), self._syn[keep, 1].tolist(),
                                self._syn_scores[keep].tolist()))
            fresh_syn = set(_rows(conn, "SELECT entity, neighbour, score FROM synonyms WHERE "
                                        "entity IN ({}) OR neighbour IN ({})", touched["g"]))
            self._set_synonyms(kept_syn + sorted(fresh_syn))
        if touched["f"]:
            f = np.fromiter(touched["f"], dtype=np.int64)
            for i in touched["f"]:
                self._predicates.pop(i, None)
            rows = _rows(conn, "SELECT id, subject, object, predicate FROM facts WHERE id IN ({})",
                         touched["f"])
            self._predicates.update({r[0]: r[3] for r in rows})
            merged = np.vstack([self._facts[~np.isin(self._facts[:, 0], f)], _ints([r[:3] for r in rows], 3)])
            self._facts = merged[np.argsort(merged[:, 0], kind="stable")]

    # --- the matrix ---------------------------------------------------------------------------

    def build(self) -> Graph:
        by_name = sorted(self._entities.items(), key=lambda item: item[1])
        entity_ids = np.array([i for i, _ in by_name], dtype=np.int64)
        names = [name for _, name in by_name]
        n_ent = len(entity_ids)
        top = int(max(entity_ids.max(initial=0), self._fe[:, :2].max(initial=0),
                      self._pe[:, 1].max(initial=0), self._facts[:, 1:].max(initial=0),
                      self._syn.max(initial=0)))
        node = np.full(top + 1, -1, dtype=np.int64)
        node[entity_ids] = np.arange(n_ent)
        passage_ids = self._passages
        n = n_ent + len(passage_ids)

        pe_p = n_ent + np.searchsorted(passage_ids, self._pe[:, 0])
        pe_e = node[self._pe[:, 1]]
        if len(self._syn):  # a pair in both lists is one edge; its weight the larger score
            scores = self._syn_scores
            sa, sb = node[self._syn[:, 0]], node[self._syn[:, 1]]
            lo, hi = np.minimum(sa, sb), np.maximum(sa, sb)
            key = lo * n + hi
            order = np.lexsort((-scores, key))
            _, first = np.unique(key[order], return_index=True)
            pick = order[first]
            sa, sb, sw = lo[pick], hi[pick], scores[pick]
        else:
            sa = sb = _EMPTY
            sw = np.zeros(0)
        rows = np.concatenate([pe_p, node[self._fe[:, 0]], sa])
        cols = np.concatenate([pe_e, node[self._fe[:, 1]], sb])
        if len(rows) and (rows.min() < 0 or cols.min() < 0):
            raise MemoryStoreError("the hipporag graph names entities or passages that do not "
                                   "exist: the store is corrupt; move it away and re-index")
        weights = np.concatenate([np.ones(len(pe_p)), self._fe[:, 2].astype(np.float64), sw])
        # scipy loads here, not with the module: the registry imports every built-in backend, so
        # a module-level import cost each `middle memory` command a third of a second
        from scipy import sparse

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
        facts = self._facts
        return Graph(
            entity_ids=entity_ids, entity_names=names, passage_ids=passage_ids,
            fact_ids=facts[:, 0].copy(), fact_subject=node[facts[:, 1]],
            fact_object=node[facts[:, 2]],
            fact_predicate=[self._predicates[i] for i in facts[:, 0].tolist()],
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
