"""The sliding_window memory backend: rolling incremental summaries over a window (seed 004)."""

from .backend import PROJECT_CONVERSATION, SlidingWindowBackend, SlidingWindowOptions
from .window import doc_window, window_range

__all__ = [
    "PROJECT_CONVERSATION",
    "SlidingWindowBackend",
    "SlidingWindowOptions",
    "doc_window",
    "window_range",
]
