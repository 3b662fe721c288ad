"""The handful of exception types the product raises; each message says how to fix the problem.

They are turned into one line of user output only at the CLI and HTTP edges. The ticket-domain
ones are defined in `tickets.errors` (which imports nothing from `orchestrator`) and re-exported.
"""

from __future__ import annotations

from tickets.errors import ClaimLost, ConfigError, MiddleError, StoreError, StoreUnavailable, TicketError

__all__ = [
    "MiddleError", "ConfigError", "TicketError", "StoreError", "StoreUnavailable", "ClaimLost",
    "MemoryStoreError", "CodingAgentError", "AgentReplyError", "ModelAccessError", "GitError",
    "RunInterrupted", "BatchStopper", "CheckCannotStart", "CheckFailed", "CodingAgentMissing",
    "CodingAgentUnreachable",
]


class MemoryStoreError(MiddleError):
    """A memory backend or store failed (unreadable dir, corrupt file). Never stops a ticket."""


class CodingAgentError(MiddleError):
    """The coding agent (Claude Code) could not run a turn: not installed, crashed, timed out."""


class AgentReplyError(MiddleError):
    """The middle agent's LLM gave no usable decision, even after one repair attempt."""


class BatchStopper(MiddleError):
    """A problem every other ticket of a batch would meet the same way: the batch stops at the
    first one and says it once (the model cannot be used)."""


class ModelAccessError(AgentReplyError, BatchStopper):
    """The model API cannot be used at all (rejected key, unknown model, unreachable host): every
    other ticket would fail the same way, so a batch stops at the first one."""


class CodingAgentMissing(CodingAgentError, BatchStopper):
    """The coding agent's CLI is not installed (or not where `cli_path` says): every ticket on it
    would fail the same way, so this is said once, before any ticket is claimed."""


class CodingAgentUnreachable(CodingAgentMissing):
    """Nothing answers at the base URL the coding agent was given for its model (a local server not
    started): as a missing CLI, said once before any ticket on that agent is claimed."""


class CheckCannotStart(ConfigError):
    """A `[check]` command (or a ticket's `check:`) cannot really run (not found, its runner not
    installed, no tests collected, no report): a mistake in the config, not a failure for the
    middle agent to correct. It is this ticket's error alone (its own `check:` may be the mistake);
    the batch goes on. Met before any turn, the ticket stays pending (running/policy.py)."""


class CheckFailed(MiddleError):
    """A ticket's check still fails after its correction rounds: the run fails (resumable), its
    work committed on its branch."""


class GitError(MiddleError):
    """A git operation on the project's repository failed (not a repository, a conflict, a dirty
    working tree in the way); the message says what was left as it was and what to do."""


class RunInterrupted(KeyboardInterrupt):
    """A run stopped from outside (Ctrl-C, SIGTERM, SIGHUP, a server shutdown): handled like
    Ctrl-C everywhere, so the run and its turn are marked interrupted and can be resumed."""

    def __init__(self, why: str = "interrupted by the user"):
        super().__init__(why)
        self.why = why
