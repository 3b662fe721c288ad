"""The handful of exception types the product raises; each message says how to fix the problem.

They are turned into one line of user output only at the CLI edge (orchestrator/cli.py).
"""

from __future__ import annotations


class MiddleError(Exception):
    """Base class: `str(err)` is a complete, user-facing sentence with what to do next."""


class ConfigError(MiddleError):
    """Bad configuration: unknown backend, unknown option, bad value, unsafe project id."""


class TicketError(MiddleError):
    """A ticket that cannot be loaded or run as asked (bad file, missing path, unknown id)."""


class MemoryStoreError(MiddleError):
    """A memory backend or store failed (unreadable dir, corrupt file). Never stops a ticket."""


class WorkerError(MiddleError):
    """The coding agent (Claude Code) could not run a turn: not installed, crashed, timed out."""


class AgentReplyError(MiddleError):
    """The middle agent's LLM gave no usable decision, even after one repair attempt."""
