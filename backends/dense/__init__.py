"""The dense memory backend: cosine similarity of embeddings in a FAISS index (a baseline)."""

from __future__ import annotations

from backends.lazy import lazy_exports

_LAZY = {'DenseBackend': 'backend', 'DenseOptions': 'backend'}  # imported on first use (see backends/lazy.py)

__all__ = sorted(_LAZY)
__getattr__ = lazy_exports(__name__, _LAZY)
