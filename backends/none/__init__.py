"""The `none` memory backend: keeps nothing, recalls nothing (memory switched off)."""

from __future__ import annotations

from backends.lazy import lazy_exports

_LAZY = {'NoneBackend': 'backend', 'NoneOptions': 'backend'}  # imported on first use (see backends/lazy.py)

__all__ = sorted(_LAZY)
__getattr__ = lazy_exports(__name__, _LAZY)
