"""The ticket domain: the ticket model, its SQLite store and ticket sources."""

from tickets.model import (
    RunStatus,
    Ticket,
    TicketStatus,
    validate_project_id,
    validate_ticket_id,
)
from tickets.source import (
    LoadResult,
    MarkdownFolderSource,
    TicketFileError,
    TicketSource,
    load_ticket_file,
    load_tickets,
)
from tickets.store import TicketStore

__all__ = [
    "LoadResult",
    "MarkdownFolderSource",
    "RunStatus",
    "Ticket",
    "TicketFileError",
    "TicketSource",
    "TicketStatus",
    "TicketStore",
    "load_ticket_file",
    "load_tickets",
    "validate_project_id",
    "validate_ticket_id",
]
