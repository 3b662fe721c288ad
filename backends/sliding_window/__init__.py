"""The sliding_window memory backend: rolling incremental summaries over a window."""

from __future__ import annotations

from backends.lazy import lazy_exports

_LAZY = {
    "PROJECT_CONVERSATION": "backend",
    "SlidingWindowBackend": "backend",
    "SlidingWindowOptions": "backend",
    "doc_window": "window",
    "window_range": "window",
}  # imported on first use (see backends/lazy.py)

__all__ = sorted(_LAZY)
__getattr__ = lazy_exports(__name__, _LAZY)
