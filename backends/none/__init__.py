"""The `none` memory backend: keeps nothing, recalls nothing (memory switched off)."""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use: loading the plugin registry (e.g. for `middle --help`) then costs no
# NumPy, FAISS or SciPy.
_LAZY = {'NoneBackend': 'backend', 'NoneOptions': 'backend'}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(name)
