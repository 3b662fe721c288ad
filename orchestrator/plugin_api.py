"""What a plugin author imports: the hook marker, the backend base class, its types and errors.

This module is the whole public surface for plugins: backends and third-party plugins import
nothing else from `orchestrator` (import-linter contracts in the tests keep it so). The backend
base class and its types live in `orchestrator.plugins.memory_backend` (the core imports them from there;
nothing in the core imports this module). The contract suite is re-exported lazily, so importing
this module stays cheap and never needs pytest. The shared retrieval parts of the built-in
backends are `backends.retrieval` (the core never imports them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.coding_agent.base import CodingAgent, EventCallback, TurnResult
from orchestrator.config.paths import cache_root as cache_dir  # the per-user cache folder
from orchestrator.errors import CodingAgentError, ConfigError, MemoryStoreError, MiddleError, TicketError
from orchestrator.plugins.hookspecs import hookimpl
from orchestrator.plugins.memory_backend import (
    ConversationContext,
    MemoryBackend,
    MemoryDatabase,
    MemoryRecord,
    RetrieveResult,
    TextLLM,
    check_texts,
    shortest_unique,
)
from tickets.model import TurnRecord

if TYPE_CHECKING:
    from orchestrator.coding_agent.pricing import TokenPrice, turn_cost
    from orchestrator.plugins.backend_options import BackendOptions
    from orchestrator.testing.source_contract import TicketSourceContract, TicketSpec
    from tickets.model import Ticket
    from tickets.source import ClosingSource, LoadResult, SourceContext, TicketFileError, TicketSource

__all__ = [
    "hookimpl",
    "shortest_unique",
    "BackendOptions",
    "MemoryBackend",
    "MemoryDatabase",
    "MemoryRecord",
    "RetrieveResult",
    "ConversationContext",
    "TextLLM",
    "Ticket",
    "CodingAgent",
    "TurnResult",
    "TurnRecord",
    "EventCallback",
    "TokenPrice",  # noqa: F822 - served lazily by __getattr__ (pydantic)
    "turn_cost",  # noqa: F822 - served lazily by __getattr__
    "check_texts",
    "memory_backend",
    "MiddleError",
    "ConfigError",
    "MemoryStoreError",
    "CodingAgentError",
    "MemoryBackendContract",  # noqa: F822 - served lazily by __getattr__ (no pytest at import)
    "TicketSource",
    "ClosingSource",
    "SourceContext",
    "LoadResult",
    "TicketFileError",
    "TicketError",
    "TicketSourceContract",
    "TicketSpec",
    "cache_dir",
]


def memory_backend(ctx: Any, project: str | None, op: str) -> Any:
    """In a plugin's click command: `with memory_backend(ctx, project, "reflect") as backend:`
    the configured backend of the project (default project when None), under the facade's locks.

    It uses the same config and services as every `middle` command; a backend operation that
    raises is reported as one `error:` line. `backend` is your class when memory is configured
    with it; check `isinstance` and raise ConfigError otherwise.
    """
    from orchestrator.cli.context import command_backend

    return command_backend(ctx, project, op)


def __getattr__(name: str) -> Any:
    # Lazy re-exports: the contract suite needs pytest.
    if name == "MemoryBackendContract":
        from orchestrator.testing.contract import MemoryBackendContract

        return MemoryBackendContract
    if name in ("TicketSourceContract", "TicketSpec"):  # the ticket source contract suite (pytest)
        from orchestrator.testing import source_contract

        return getattr(source_contract, name)
    if name in ("TicketSource", "ClosingSource", "SourceContext", "LoadResult", "TicketFileError"):  # a source's parts
        from tickets import source

        return getattr(source, name)
    if name in ("TokenPrice", "turn_cost"):  # pydantic: a turn priced from its tokens (pricing.py)
        from orchestrator.coding_agent import pricing

        return getattr(pricing, name)
    if name == "BackendOptions":  # pydantic: imported when a backend's options are defined
        from orchestrator.plugins.backend_options import BackendOptions

        return BackendOptions
    if name == "Ticket":  # the ticket model (a checked dataclass), for lifecycle hooks' annotations
        from tickets.model import Ticket

        return Ticket
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
