"""The hindsight memory backend: retain / recall / reflect over typed facts, in-process and offline."""

from __future__ import annotations

from backends.lazy import lazy_exports

_LAZY = {'HindsightBackend': 'backend', 'HindsightOptions': 'options'}  # imported on first use (see backends/lazy.py)

__all__ = sorted(_LAZY)
__getattr__ = lazy_exports(__name__, _LAZY)
