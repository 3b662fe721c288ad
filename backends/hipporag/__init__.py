"""The hipporag memory backend: HippoRAG 2 graph memory with Personalized PageRank (recommended)."""

from .backend import HippoRAGBackend
from .options import HippoRAGOptions

__all__ = ["HippoRAGBackend", "HippoRAGOptions"]
