"""The handful of exception types the product raises; each message says how to fix the problem.

They are turned into one line of user output only at the CLI and HTTP edges. The ticket-domain
ones are defined in `tickets.errors` (which imports nothing from `orchestrator`) and re-exported.
"""

from __future__ import annotations

from tickets.errors import ConfigError, MiddleError, StoreError, TicketError

__all__ = [
    "MiddleError", "ConfigError", "TicketError", "StoreError",
    "MemoryStoreError", "WorkerError", "AgentReplyError",
]


class MemoryStoreError(MiddleError):
    """A memory backend or store failed (unreadable dir, corrupt file). Never stops a ticket."""


class WorkerError(MiddleError):
    """The coding agent (Claude Code) could not run a turn: not installed, crashed, timed out."""


class AgentReplyError(MiddleError):
    """The middle agent's LLM gave no usable decision, even after one repair attempt."""
