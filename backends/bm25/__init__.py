"""The bm25 memory backend: SQLite FTS5 keyword search with Porter stemming (a baseline)."""

from .backend import Bm25Backend, Bm25Options

__all__ = ["Bm25Backend", "Bm25Options"]
