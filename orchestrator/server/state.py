"""What every route shares: the config, the services, the run manager, the token; small lookups."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from fastapi import Request

from orchestrator.config.settings import Config
from orchestrator.errors import MiddleError, TicketError
from orchestrator.running.sync import sync
from orchestrator.server.background_runs import RunManager
from orchestrator.server.errors import NotFound, memory_off
from orchestrator.services import Services
from tickets.model import RunRow, Ticket, validate_project_id
from tickets.source import TicketFileError
from tickets.store import TicketStore

if TYPE_CHECKING:
    from orchestrator.memory.facade import MemoryFacade
    from orchestrator.workspace import Review

log = logging.getLogger("middle.server")


@dataclass
class ServerState:
    config: Config
    services: Services
    runs: RunManager
    token: str | None = None  # the first token: share links' keys derive from it
    tokens: dict[str, str] = field(default_factory=dict)  # name -> token (see server.auth)
    fake: bool = False
    user: str | None = None  # who changes on a server without tokens are by (memory_api.who)
    # project -> its memory catalog, kept up to date: memory_api.project_catalog
    catalogs: dict[str, Any] = field(default_factory=dict)
    catalog_lock: threading.Lock = field(default_factory=threading.Lock)
    catalog_locks: dict[str, threading.Lock] = field(default_factory=dict)  # one per project
    stopping: threading.Event = field(default_factory=threading.Event)  # ends live streams
    live_streams: int = 0  # event streams being served now (each ends when its client leaves)
    _sync_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def store(self) -> TicketStore:
        return self.services.store

    def memory_or_none(self) -> MemoryFacade | None:
        """The memory facade, or None when memory is off."""
        with self.runs.build_lock:  # Services builds its parts lazily, not thread-safely
            return self.services.memory

    def review(self) -> Review:
        """diff / merge / discard / revert of tickets."""
        with self.runs.build_lock:  # Services builds its parts lazily, not thread-safely
            return self.services.review

    def memory(self) -> MemoryFacade:
        """The memory facade; MemoryOff (503) when this server runs without memory."""
        facade = self.memory_or_none()
        if facade is None:
            raise memory_off()
        return facade

    def sync_folder(self) -> tuple[list[TicketFileError], str | None]:
        """Load the ticket source into the store (the source is the source of truth), as `middle sync`.

        Read on every board or list request, so a ticket file added by hand or by another process
        shows up without a restart. Returns the tickets that did not load and a source-level problem.
        """
        with self._sync_lock:
            try:
                result = sync(self.store, self.config, registry=self.services.registry)
            except MiddleError as exc:  # no folder yet (or a bad source): the store's tickets are still shown
                return [], str(exc)
        return result.errors, None

    def project_ids(self, *, with_memory: bool = True) -> list[str]:
        """Projects that have tickets, plus (with_memory) those with only a memory store on disk."""
        ids = set(self.store.project_ids())
        memory_dir = self.config.memory_dir if with_memory else None
        if memory_dir is not None and memory_dir.is_dir():
            ids |= {p.name for p in memory_dir.iterdir() if p.is_dir() and not p.name.startswith(".")}
        return sorted(ids)

    def ticket(self, ticket_id: str) -> Ticket:
        """A ticket by id, after reading the folder (a file added a moment ago counts); 404 if none."""
        self.sync_folder()
        return ticket_or_404(self.store, ticket_id)


def get_state(request: Request) -> ServerState:
    return cast(ServerState, request.app.state.middle)


def ticket_or_404(store: TicketStore, ticket_id: str) -> Ticket:
    try:
        return store.get_ticket(ticket_id)
    except TicketError as exc:
        raise NotFound(str(exc)) from None


def run_or_404(store: TicketStore, run_id: str) -> RunRow:
    try:
        return store.get_run(run_id)
    except TicketError as exc:
        raise NotFound(str(exc)) from None


def checked_project(project_id: str) -> str:
    """The project id if safe (ConfigError, a 400 naming the id and never a path, otherwise)."""
    return validate_project_id(project_id)
