"""The `none` memory backend: keeps nothing, recalls nothing (memory switched off)."""

from .backend import NoneBackend, NoneOptions

__all__ = ["NoneBackend", "NoneOptions"]
