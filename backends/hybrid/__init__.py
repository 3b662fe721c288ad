"""The hybrid memory backend: dense + BM25 fused, then the seed 001/002 pipeline (recommended)."""

from .backend import HybridBackend, HybridOptions

__all__ = ["HybridBackend", "HybridOptions"]
