"""The hybrid memory backend: dense + BM25 fused, then the seed 001/002 pipeline (recommended)."""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use: loading the plugin registry (e.g. for `middle --help`) then costs no
# NumPy, FAISS or SciPy.
_LAZY = {'HybridBackend': 'backend', 'HybridOptions': 'backend'}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(name)
