"""The hybrid memory backend: dense + BM25 fused, then the retrieval pipeline (recommended)."""

from __future__ import annotations

from backends.lazy import lazy_exports

_LAZY = {'HybridBackend': 'backend', 'HybridOptions': 'backend'}  # imported on first use (see backends/lazy.py)

__all__ = sorted(_LAZY)
__getattr__ = lazy_exports(__name__, _LAZY)
