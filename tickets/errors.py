"""The error types the ticket domain raises; `orchestrator.errors` re-exports them with the rest.

They live here, not in `orchestrator`, because `tickets` imports nothing from `orchestrator`
(the dependency flows one way). Each message is a complete sentence saying how to fix the problem.
"""

from __future__ import annotations


class MiddleError(Exception):
    """Base class: `str(err)` is a complete, user-facing sentence with what to do next."""


class ConfigError(MiddleError):
    """Bad configuration: unknown backend, unknown option, bad value, unsafe project id."""


class TicketError(MiddleError):
    """A ticket that cannot be loaded or run as asked (bad file, missing path, unknown id)."""


class StoreError(MiddleError):
    """A state file (ticket database, checkpoints) is unreadable, corrupt or of another version."""


class StoreUnavailable(StoreError):
    """The shared store's server cannot be reached right now (a restart, the network): the work
    it interrupted can be continued once it is back."""


class ClaimLost(MiddleError):
    """This process no longer holds the claim of the run it is working (another runner took it
    over after its lease ran out, or its lease could not be renewed): it stops at once and writes
    nothing more of that run."""
