"""Test helpers for backend authors: the contract suite and an in-memory fake backend."""

from __future__ import annotations

from typing import Any

from orchestrator.testing.inmemory import InMemoryBackend, InMemoryOptions

try:  # rewrite the contract's asserts so failures show values; pytest may be absent at runtime
    import pytest

    pytest.register_assert_rewrite("orchestrator.testing.contract")
except ImportError:  # pragma: no cover - only the contract needs pytest
    pass

__all__ = ["InMemoryBackend", "InMemoryOptions", "MemoryBackendContract"]


def __getattr__(name: str) -> Any:
    # Imported lazily so InMemoryBackend works without pytest installed.
    if name == "MemoryBackendContract":
        from orchestrator.testing.contract import MemoryBackendContract

        return MemoryBackendContract
    raise AttributeError(name)
