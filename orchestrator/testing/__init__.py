"""Test helpers for backend authors: the contract suite, a real-process check, a fake backend."""

from __future__ import annotations

from typing import Any

from orchestrator.testing.inmemory import InMemoryBackend, InMemoryOptions

try:  # rewrite the contract's asserts so failures show values; pytest may be absent at runtime
    import pytest

    pytest.register_assert_rewrite("orchestrator.testing.contract",
                                   "orchestrator.testing.robustness",
                                   "orchestrator.testing.source_contract",
                                   "orchestrator.testing.coding_agent_contract")
except ImportError:  # pragma: no cover - only the contract needs pytest
    pass

__all__ = ["AgentHarness", "CodingAgentContract", "InMemoryBackend", "InMemoryOptions", "MemoryBackendContract",
           "TicketSourceContract", "builtin_harness", "run_processes", "make_repo"]


def __getattr__(name: str) -> Any:
    # Imported lazily so InMemoryBackend works without pytest installed.
    if name == "MemoryBackendContract":
        from orchestrator.testing.contract import MemoryBackendContract

        return MemoryBackendContract
    if name in ("CodingAgentContract", "AgentHarness", "builtin_harness"):
        from orchestrator.testing import coding_agent_contract

        return getattr(coding_agent_contract, name)
    if name == "TicketSourceContract":
        from orchestrator.testing.source_contract import TicketSourceContract

        return TicketSourceContract
    if name == "make_repo":  # a committed git repository (tickets run on their own branch)
        from orchestrator.testing.git import make_repo

        return make_repo
    if name == "run_processes":  # the real-process check, usable without pytest
        from orchestrator.testing.processes import run_processes

        return run_processes
    raise AttributeError(name)
