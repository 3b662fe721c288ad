"""Run-time dependencies of the graph, passed through LangGraph's runtime context (never state)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from orchestrator.agent.middle_agent import MiddleAgent
from orchestrator.coding_agent.base import CodingAgent, EventCallback
from orchestrator.lifecycle.run_lifecycle import RunLifecycle
from orchestrator.memory.facade import MemoryFacade
from orchestrator.workspace import Worktrees
from tickets.store import TicketStore


@dataclass(frozen=True)
class Limits:
    """What ends a ticket as failed: turns and cost (the per-turn timeout lives in the coding agent)."""

    max_turns: int = 20
    max_cost_usd: float = 5.0


@dataclass
class TicketContext:
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

    def __post_init__(self) -> None:
        if self.lifecycle is None:
            self.lifecycle = RunLifecycle(self.store, self.hooks)
        if self.check is None:  # no [check] commands; a ticket's own `check:` still runs, with these limits
            from orchestrator.config.settings import CheckConfig

            self.check = CheckConfig()
