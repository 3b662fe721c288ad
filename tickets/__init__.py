"""The ticket domain: the ticket model, its store (SQLite or PostgreSQL) and ticket sources."""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use, so `tickets.errors` (which every error path imports) costs nothing more.
_LAZY = {
    "RunStatus": "model", "Ticket": "model", "TicketStatus": "model",
    "validate_project_id": "model", "validate_ticket_id": "model",
    "LoadResult": "source", "MarkdownFolderSource": "source", "TicketFileError": "source",
    "TicketSource": "source", "load_ticket_file": "source", "load_tickets": "source",
    "TicketStore": "store",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"tickets.{_LAZY[name]}"), name)
    raise AttributeError(name)
