"""Run-time dependencies of the graph, passed through LangGraph's runtime context (never state)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from orchestrator.agent.middle_agent import MiddleAgent
from orchestrator.coding_agent.base import CodingAgent, EventCallback
from orchestrator.lifecycle.run_lifecycle import RunLifecycle
from orchestrator.memory.facade import MemoryFacade
from orchestrator.workspace import Worktrees
from tickets.model import RunRow, TurnRow
from tickets.store import TicketStore


class RunAccess(Protocol):
    """The claimed run, as the nodes reach it (orchestrator.running.run.Run is the one kind):
    reads, and writes fenced by the claim's token, so a runner whose run was taken over writes
    nothing more of it (ClaimLost)."""

    ticket_id: str
    run_id: str

    def guard(self) -> None:
        """Raise ClaimLost once the run lost its claim."""

    def check(self) -> None:
        """Before a step the store cannot fence (commit, push): raise ClaimLost unless still ours."""

    def record(self) -> RunRow: ...
    def turn(self, turn_no: int) -> TurnRow | None: ...
    def turns(self) -> list[TurnRow]: ...
    def round(self) -> int: ...
    def total_cost(self) -> float: ...
    def set_fields(self, **fields: Any) -> None: ...
    def start_turn(self, turn_no: int, prompt: str, session_id: str | None, resume: bool,
                   coding_agent: str | None = None) -> None: ...
    def finish_turn(self, turn_no: int, **result: Any) -> None: ...
    def assess_turn(self, turn_no: int, memories: str, decision: dict[str, Any]) -> None: ...
    def turn_observed(self, turn_no: int) -> bool: ...
    def mark_observed(self, turn_no: int) -> None: ...
    def turn_hooked(self, turn_no: int) -> bool: ...
    def mark_hooked(self, turn_no: int) -> None: ...
    def event(self, kind: str, data: dict[str, Any]) -> None: ...
    def put_check_baseline(self, base_commit: str, command: str, result: dict[str, Any]) -> None: ...
    def complete(self, summary: str, *, say: Callable[[str], None] | None = None, **event: Any) -> bool: ...
    def fail(self, reason: str, **how: Any) -> bool: ...


@dataclass(frozen=True)
class Limits:
    """What ends a ticket as failed: turns and cost (the per-turn timeout lives in the coding agent)."""

    max_turns: int = 20
    max_cost_usd: float = 5.0


@dataclass
class TicketContext:
    run: RunAccess  # the claimed run: every write the nodes make to it goes through here
    store: TicketStore
    agent: MiddleAgent
    coding_agent: CodingAgent
    memory: MemoryFacade | None = None  # None: memory off, and no memory call is ever made
    limits: Limits = field(default_factory=Limits)
    num_to_retrieve: int = 5
    hooks: Any = None  # pluggy hook relay for lifecycle hooks, or None
    on_event: EventCallback | None = None  # the coding agent's progress, for the terminal
    say: Callable[[str], None] = lambda _msg: None  # one-line progress notes
    lifecycle: RunLifecycle | None = None  # ends runs (built from store and hooks when not given)
    worktrees: Worktrees | None = None  # None: Claude Code edits the project in place
    dependencies: str = "merged"  # [run] dependencies: "complete" starts from dependency branches
    stop: Any = None  # a threading.Event: once set, no new Claude Code turn starts
    # A `middle worker` runs every ticket in its own clone of [project] repo_url, whatever
    # directory the ticket names on the machine that filed it.
    project_override: str | None = None
    check: Any = None  # [check] (orchestrator.config.settings.CheckConfig); None: no checks
    worktree_setup: Any = None  # [worktree] copy and setup (WorktreeConfig); None: none
    record: Callable[[str, dict[str, Any]], None] = lambda _kind, _data: None  # a run event (check, setup)
    # A resumed run: the ticket's checks as the config and the ticket say now (they replace the
    # checkpoint's snapshot of them; orchestrator.running.refresh). None: the snapshot's.
    ticket_overrides: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.lifecycle is None:
            self.lifecycle = RunLifecycle(self.store, self.hooks)
        if self.check is None:  # no [check] commands; a ticket's own `check:` still runs, with these limits
            from orchestrator.config.settings import CheckConfig

            self.check = CheckConfig()
