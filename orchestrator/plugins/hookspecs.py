"""Every hook a middle-agent plugin can implement, one line each (see docs/hooks.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pluggy

if TYPE_CHECKING:
    from tickets.store import TicketStore

if TYPE_CHECKING:  # annotations only: importing the ticket model here would be a cycle for plugins
    import click

    from tickets.model import Ticket, TurnRecord

hookspec = pluggy.HookspecMarker("middle_agent")
hookimpl = pluggy.HookimplMarker("middle_agent")


@hookspec
def register_memory_backends(register: Callable[[type], None]) -> None:
    """Register memory backends: register(BackendClass) once each (optional methods: memory-backend.md)."""


@hookspec
def register_coding_agents(register: Callable[[type], None]) -> None:
    """Register coding-agent classes (like Claude Code) by calling register(CodingAgentClass)."""


@hookspec
def register_ticket_sources(register: Callable[[type], None]) -> None:
    """Register ticket source classes (like the Markdown folder) by calling register(SourceClass)."""


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add click commands to `middle`, e.g. a backend's own `middle memory ...` subcommand."""


@hookspec
def on_ticket_start(ticket: Ticket, run_id: str) -> None:
    """Called when a run of a ticket starts (or resumes), before any memory recall."""


@hookspec
def on_turn_end(ticket: Ticket, run_id: str, turn: TurnRecord) -> None:
    """Called after each coding-agent turn with its TurnRecord (prompt, response, cost, status)."""


@hookspec
def on_ticket_complete(ticket: Ticket, run_id: str, summary: str, config: Any, store: TicketStore,
                       say: Callable[[str], None]) -> None:
    """Called when a ticket completes (its checks passed, its summary indexed); `say` notes a line in its run."""


@hookspec
def on_ticket_failed(ticket: Ticket, run_id: str, reason: str) -> None:
    """Called when a ticket fails (a limit reached or a turn that could not run)."""
