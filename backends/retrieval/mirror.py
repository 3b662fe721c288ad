"""In-memory copies of a store's vector tables (a matrix, or a FAISS index), caught up through the
store's change log on each call."""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.storage import Store

from .chunking import CHUNK_SLOTS, chunk_ids
from .vector import VectorIndex


class _Mirror:
    """One vector table as of a generation; `sync` applies the changes logged since. `kind`:
    the value of the change log's `kind` column for this table (None: a log without kinds)."""

    def __init__(self, table: str, kind: str | None = None):
        self.table, self.kind = table, kind
        self.gen: int | None = None

    def sync(self, store: Store, conn: Any) -> None:
        gen, floor = store.generation(conn)
        if self.gen == gen:
            return
        if self.gen is None or self.gen < floor or self.gen > gen:
            self._reset()
            ids, vectors = store.vector_rows(conn, self.table)
        else:
            # Remove every touched id, then re-add those that still have a vector: idempotent,
            # so the order of adds and deletes within the range does not matter.
            where = "" if self.kind is None else "kind = ? AND "
            touched = [r[0] for r in conn.execute(
                f"SELECT DISTINCT id FROM changes WHERE {where}gen > ? AND gen <= ?",
                (*((self.kind,) if self.kind else ()), self.gen, gen))]
            self._remove(np.asarray(touched, dtype=np.int64))
            ids, vectors = store.vector_rows(conn, self.table, touched)
        if vectors is not None:
            self._add(ids, vectors)
        self.gen = gen

    def invalidate(self) -> None:
        """Forget everything: the next sync reloads (after a write that rolled back)."""
        self._reset()
        self.gen = None

    def _reset(self) -> None:
        raise NotImplementedError

    def _remove(self, ids: np.ndarray) -> None:
        raise NotImplementedError

    def _add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        raise NotImplementedError


class MatrixMirror(_Mirror):
    """Vectors as one (n, d) array ordered by id: every row is scored per query. Rows live in a
    buffer with spare capacity, so appending new docs copies only the new rows."""

    def __init__(self, table: str, kind: str | None = None):
        super().__init__(table, kind)
        self._reset()

    def _reset(self) -> None:
        self._ids = np.zeros(0, dtype=np.int64)
        self._rows: np.ndarray | None = None
        self.n = 0

    @property
    def ids(self) -> np.ndarray:
        return self._ids[:self.n]

    @property
    def matrix(self) -> np.ndarray | None:
        return None if self._rows is None else self._rows[:self.n]

    def _remove(self, ids: np.ndarray) -> None:
        if not (len(ids) and self.n) or self._rows is None:
            return
        keep = ~np.isin(self.ids, ids)
        if not keep.all():
            self._ids, self._rows = self.ids[keep], np.ascontiguousarray(self._rows[:self.n][keep])
            self.n = len(self._ids)

    def _add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if self._rows is None or self.n == 0:
            self._ids, self._rows, self.n = ids.copy(), vectors.copy(), len(ids)
            return
        if ids.min() <= self._ids[self.n - 1]:  # not a pure append: merge in id order
            merged = np.concatenate([self.ids, ids])
            order = np.argsort(merged, kind="stable")
            self._ids = merged[order]
            self._rows = np.ascontiguousarray(np.vstack([self._rows[:self.n], vectors])[order])
            self.n = len(self._ids)
            return
        need = self.n + len(ids)
        if need > len(self._ids):  # grow by half again: appends stay amortised O(new rows)
            capacity = max(need, len(self._ids) * 3 // 2)
            grown = np.empty((capacity, self._rows.shape[1]), dtype=np.float32)
            grown[:self.n] = self.matrix
            grown_ids = np.empty(capacity, dtype=np.int64)
            grown_ids[:self.n] = self.ids
            self._rows, self._ids = grown, grown_ids
        self._ids[self.n:need] = ids
        self._rows[self.n:need] = vectors
        self.n = need

    def scores(self, query: np.ndarray) -> np.ndarray:
        if self._rows is None or self.n == 0:
            return np.zeros(0, dtype=np.float32)
        # einsum runs one thread: BLAS gemv split over threads was 3-4x slower on a busy
        # 2-core machine (memory-bound work), and its blocking could vary with the row count.
        return np.einsum("ij,j->i", self._rows[:self.n], np.asarray(query, dtype=np.float32))


class IndexMirror(_Mirror):
    """Vectors in the shared FAISS VectorIndex, for nearest-neighbour search (synonymy)."""

    def __init__(self, table: str, kind: str | None = None):
        super().__init__(table, kind)
        self.index: VectorIndex | None = None

    def start(self, index: VectorIndex, gen: int) -> None:
        """Begin from an index saved at generation `gen` (a snapshot); sync catches up."""
        self.index, self.gen = index, gen

    def _reset(self) -> None:
        self.index = None

    def _remove(self, ids: np.ndarray) -> None:
        if self.index is not None and len(ids):
            self.index.remove(ids)

    def _add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        if self.index is None or (len(self.index) == 0 and self.index.dimension != vectors.shape[1]):
            self.index = VectorIndex(vectors.shape[1])
        self.index.add(ids, vectors)

    def add(self, ids: list[int], vectors: np.ndarray) -> None:
        """Mirror rows being written in the current transaction (invalidate if it fails)."""
        if ids:
            self._add(np.asarray(ids, dtype=np.int64), vectors)

    def remove(self, ids: list[int]) -> None:
        self._remove(np.asarray(ids, dtype=np.int64))

    def search(self, vector: np.ndarray, k: int) -> tuple[list[int], list[float]]:
        if self.index is None:
            return [], []
        return self.index.search(vector, k)


class ChunkMirror(IndexMirror):
    """The FAISS mirror of a table of chunk vectors (see chunking): the change log names doc
    ids, so removing a doc removes every chunk slot it may hold."""

    def _remove(self, ids: np.ndarray) -> None:
        super()._remove(chunk_ids(ids))


class ChunkMatrixMirror(MatrixMirror):
    """A MatrixMirror of a table of chunk vectors: rows are ordered by chunk id, so a doc's
    chunks are adjacent, and a doc is scored by its best chunk."""

    def _remove(self, ids: np.ndarray) -> None:
        super()._remove(chunk_ids(ids))

    @property
    def docs(self) -> np.ndarray:
        """The doc ids held, ascending (one per doc)."""
        return np.unique(self.ids // CHUNK_SLOTS)

    def doc_scores(self, query: np.ndarray) -> np.ndarray:
        """Per doc of `docs`, its best chunk's cosine to the query."""
        scores = self.scores(query)
        if len(scores) == 0:
            return scores
        owners = self.ids // CHUNK_SLOTS
        starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
        return np.maximum.reduceat(scores, starts)
