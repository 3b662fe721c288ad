"""The bm25 memory backend: SQLite FTS5 keyword search with Porter stemming (a baseline)."""

from __future__ import annotations

from backends.lazy import lazy_exports

_LAZY = {'Bm25Backend': 'backend', 'Bm25Options': 'backend'}  # imported on first use (see backends/lazy.py)

__all__ = sorted(_LAZY)
__getattr__ = lazy_exports(__name__, _LAZY)
