"""Every hook a middle-agent plugin can implement, one line each (see docs/plugins.md)."""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("middle_agent")
hookimpl = pluggy.HookimplMarker("middle_agent")


@hookspec
def register_memory_backends(register):
    """Register memory backend classes by calling register(BackendClass) once per class."""


@hookspec
def register_workers(register):
    """Register coding-agent worker classes (like Claude Code) by calling register(WorkerClass)."""


@hookspec
def on_ticket_start(ticket, run_id):
    """Called when a run of a ticket starts (or resumes), before any memory recall."""


@hookspec
def on_turn_end(ticket, run_id, turn):
    """Called after each coding-agent turn with the turn record (prompt, response, cost)."""


@hookspec
def on_ticket_complete(ticket, run_id, summary):
    """Called when the middle agent marks a ticket complete, after its summary is indexed."""


@hookspec
def on_ticket_failed(ticket, run_id, reason):
    """Called when a ticket fails (a limit reached or a turn that could not run)."""
