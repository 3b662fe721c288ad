"""The hindsight memory backend: retain / recall / reflect over typed facts, in-process and offline."""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use: loading the plugin registry (e.g. for `middle --help`) then costs no
# NumPy, FAISS or SciPy.
_LAZY = {'HindsightBackend': 'backend', 'HindsightOptions': 'options'}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(name)
