"""middle-agent-keyword-memory: a memory backend that ranks docs by keyword overlap."""

from .backend import KeywordBackend, KeywordOptions

__all__ = ["KeywordBackend", "KeywordOptions"]
