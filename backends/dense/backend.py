"""DenseBackend: embed the query, return the nearest docs by cosine (no fusion, no pipeline)."""

from __future__ import annotations

from backends import retrieval

DenseOptions = retrieval.DenseOptions


class DenseBackend(retrieval.RetrievalBackend):
    """Embeddings only; a baseline for `middle bench` and for paraphrase-heavy memories."""

    name = "dense"
    supersedes = True
    ranks_keywords = False
    description = "Embedding similarity (offline MiniLM by default) over a FAISS index."
    Options = DenseOptions

    def _rank(self, query: str, k: int) -> list[tuple[int, float]]:
        return self._dense(query, k)
