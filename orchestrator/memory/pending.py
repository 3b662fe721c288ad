"""Completion docs memory could not index when their ticket completed (its store was broken or
out of reach): the ticket store keeps each one marked pending, and they are indexed later, at the
next run's recall (`recall_start`) or by `middle memory retry`, never silently dropped."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickets.store import TicketStore

log = logging.getLogger("middle.memory")


@dataclass
class Retried:
    """What one retry did: docs indexed now, docs still pending, and why they still are."""

    indexed: int = 0
    pending: int = 0
    errors: list[str] = field(default_factory=list)


def index_pending(store: TicketStore, memory: Any, project_id: str | None = None) -> Retried:
    """Index every pending completion doc (of one project, or all), oldest first; a project whose
    memory still fails keeps the rest of its docs pending."""
    done = Retried()
    failed: set[str] = set()
    for ticket_id, project, doc in store.pending_memory_docs(project_id):
        if project in failed:
            done.pending += 1
            continue
        try:
            memory.index(project, [doc])
        except Exception as exc:  # the store is still broken: try again next time
            failed.add(project)
            done.pending += 1
            done.errors.append(f"project {project}: {exc}")
            log.warning("a pending memory doc of ticket %s is still not indexed: %s", ticket_id, exc)
            continue
        store.memory_doc_indexed(ticket_id, doc)
        done.indexed += 1
    return done
