"""The dense memory backend: cosine similarity of embeddings in a FAISS index (a baseline)."""

from .backend import DenseBackend, DenseOptions

__all__ = ["DenseBackend", "DenseOptions"]
