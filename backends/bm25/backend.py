"""Bm25Backend: FTS5's BM25 over stemmed words; needs no embedding model at all."""

from __future__ import annotations

from backends import retrieval

Bm25Options = retrieval.Bm25Options


class Bm25Backend(retrieval.RetrievalBackend):
    """Keyword search; a baseline for `middle bench`, strong on names and rare terms."""

    name = "bm25"
    description = "BM25 keyword search (SQLite FTS5, Porter stemming); no model needed."
    Options = Bm25Options
    uses_vectors = False

    def _rank(self, query: str, k: int) -> list[tuple[int, float]]:
        return self._store.bm25(query, k)
