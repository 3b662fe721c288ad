"""What a resumed run re-reads: the ticket's checks as `[check]` and the ticket's front matter
say now, not as its checkpoint saved them when the run began. A check command fixed after "could
not start ... fix it, then `middle resume`" is the one the resumed run runs (`[worktree]`, the
check's limits and `max_rounds` come from the config the resuming process reads already).

The checkpoint's ticket snapshot keeps the rest (its worktree, its title); the nodes that read its
checks see these values through the run's context (orchestrator.graph.takeover.local_ticket). Its
`coding_agent:` is read again too: the run's context gets that agent (a session made by another
kind is then not resumed: orchestrator.graph.nodes)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from orchestrator.errors import TicketError

if TYPE_CHECKING:
    from tickets.store import TicketStore


def current_ticket(store: TicketStore, ticket_id: str) -> Any:
    """The stored ticket with its front matter as its Markdown file says now, when it has one (a
    `check:` or `coding_agent:` edited there counts before the next sync)."""
    ticket = store.get_ticket(ticket_id)
    source = ticket.source or ""
    if source.endswith(".md") and Path(source).is_file():
        from tickets.source import load_ticket_file

        try:
            # a file without `project:` belongs to the project the ticket was loaded into
            current = load_ticket_file(source, ticket.project_path, default_project=ticket.project_id)
        except Exception as exc:  # a TicketError naming the file and the fix
            raise TicketError(f"{exc}; then resume ticket {ticket_id} again") from None
        if current.id == ticket.id:
            ticket = ticket.replace(fields=current.fields)
    return ticket


def resumed_checks(config: Any, store: TicketStore, ticket_id: str) -> dict[str, Any]:
    """The snapshot's check fields (as load_ticket makes them) from the current config and ticket
    (current_ticket: its file read again)."""
    from orchestrator.graph.checking import allows_removed_tests, commands_for, must_pass

    ticket = current_ticket(store, ticket_id)
    as_context = cast(Any, SimpleNamespace(check=config.check))  # commands_for reads only its [check]
    return {"check": commands_for(as_context, ticket), "check_must_pass": must_pass(ticket),
            "allow_removed_tests": allows_removed_tests(ticket)}
