"""HTTP errors of `middle serve`: every MiddleError becomes `{"error": message}` with a fitting status."""

from __future__ import annotations

import logging

from orchestrator.errors import (
    AgentReplyError, ConfigError, GitError, MemoryStoreError, MiddleError, StoreError, TicketError,
    WorkerError,
)

log = logging.getLogger("middle.server")


class NotFound(MiddleError):
    """An unknown ticket, run or page (404)."""


class Conflict(MiddleError):
    """The ticket is claimed by another run, here or in another process (409)."""


class Forbidden(MiddleError):
    """A request refused by the token gate or the cross-site check (403)."""


class MemoryOff(MemoryStoreError):
    """Memory is not configured, so the memory API has nothing to serve (503)."""


def status_for(exc: MiddleError) -> int:
    """The HTTP status of a MiddleError: the client's mistake, a missing thing, or a broken part."""
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, (Conflict, GitError)):  # the repository's state is in the way (dirty, conflict)
        return 409
    if isinstance(exc, Forbidden):
        return 403
    if isinstance(exc, ValueError):  # the memory facade's bad arguments (MemoryArgumentError)
        return 400
    if isinstance(exc, (MemoryStoreError, StoreError)):
        return 503  # the memory or ticket store failed; the request itself was fine
    if isinstance(exc, (WorkerError, AgentReplyError)):
        return 502
    if isinstance(exc, (ConfigError, TicketError)):
        return 400
    return 400


def memory_off() -> MemoryOff:
    return MemoryOff("memory is off on this server: set [memory] save_dir in middle.toml (or "
                     "MEMORY_SAVE_DIR) and a backend other than 'none', then restart `middle serve`")
