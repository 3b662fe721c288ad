"""The sliding_window memory backend: rolling incremental summaries over a window (seed 004)."""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use: loading the plugin registry (e.g. for `middle --help`) then costs no
# NumPy, FAISS or SciPy.
_LAZY = {'PROJECT_CONVERSATION': 'backend', 'SlidingWindowBackend': 'backend', 'SlidingWindowOptions': 'backend', 'doc_window': 'window', 'window_range': 'window'}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(name)
