"""The hipporag memory backend: HippoRAG 2 graph memory with Personalized PageRank."""

from __future__ import annotations

from backends.lazy import lazy_exports

_LAZY = {'HippoRAGBackend': 'backend', 'HippoRAGOptions': 'options'}  # imported on first use (see backends/lazy.py)

__all__ = sorted(_LAZY)
__getattr__ = lazy_exports(__name__, _LAZY)
