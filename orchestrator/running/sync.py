"""The one way tickets come in: open the chosen source, load it, check each ticket, copy it into the store.

Every path that reads tickets goes through here (`middle sync`, `middle run`, `middle tickets`,
the server, the LangGraph entry), so a rule such as [project] max_ticket_chars holds for all of
them and for every source a plugin registers (`register_ticket_sources`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Union

from orchestrator.errors import ConfigError, MiddleError, TicketError
from tickets.deps import check_dependencies
from tickets.model import Ticket
from tickets.source import (
    ClosingSource,
    LoadResult,
    MissingTicketFolder,
    SourceContext,
    TicketFileError,
    TicketSource,
    too_long,
)

if TYPE_CHECKING:
    from orchestrator.config.memo import ReadConfig
    from orchestrator.config.settings import Config
    from orchestrator.plugins.manager import PluginRegistry
    from tickets.store import TicketStore

    AnyConfig = Union[Config, ReadConfig]

__all__ = ["Loaded", "load", "load_from", "open_source", "parse_from", "store_loaded", "sync"]


@dataclass
class Loaded(LoadResult):
    """A source's tickets after the checks, with where they came from and (after `sync`) the new ids."""

    where: str = ""
    new: list[str] | None = None
    # Stored pending ticket id -> why the source no longer has it (an issue closed or deleted, a file removed).
    closed: dict[str, str] = field(default_factory=dict)
    discarded: list[str] = field(default_factory=list)  # those of `closed` this sync discarded
    # Discarded ticket id -> why the source has it again (an issue reopened, a file back): pending.
    back: dict[str, str] = field(default_factory=dict)
    reopened: list[str] = field(default_factory=list)  # those of `back` this sync put back to pending
    pull_changes: list[str] = field(default_factory=list)  # tickets a pull request's state moved, said


def parse_from(spec: str) -> tuple[str, str | None]:
    """`KIND:ARG` (or `KIND`) of `--from` as (kind, arg); `markdown:tickets`, `github:OWNER/REPO`."""
    kind, sep, arg = spec.partition(":")
    kind = kind.strip()
    if not kind:
        raise ConfigError(f"bad --from {spec!r}: write KIND:ARG, e.g. markdown:tickets")
    return kind, (arg if sep else None)


def _settings(config: AnyConfig) -> tuple[str, dict[str, Any], SourceContext]:
    """The configured source kind, its options and what it is opened with (either config shape
    gives its SourceSettings)."""
    from orchestrator.config.paths import tickets_memo

    s = config.source_settings()
    context = SourceContext(Path(s.root), Path(s.tickets_dir), Path(s.project_path), s.max_ticket_chars,
                            tickets_memo, s.project_id, Path(s.state_dir), {"github": s.github})
    return s.kind, dict(s.options), context


def open_source(config: AnyConfig, *, source: str | None = None, folder: str | Path | None = None,
                registry: PluginRegistry | None = None, options: dict[str, Any] | None = None) -> TicketSource:
    """The configured source; `source` (`KIND:ARG`) or `folder` (a Markdown folder) instead;
    `options` (e.g. `middle sync --label`) added to the source's options."""
    from orchestrator.plugins.manager import registry as shared_registry

    extra = dict(options or {})
    kind, options, context = _settings(config)
    if folder is not None:
        kind, options = "markdown", {"folder": str(folder)}
    elif source is not None:
        kind, arg = parse_from(source)
        options = {}
        if arg is not None:
            options[(registry or shared_registry()).source_class(kind).argument] = arg
    cls = (registry or shared_registry()).source_class(kind)
    return cls.open({**options, **extra}, context)  # type: ignore[no-any-return]


def load(config: AnyConfig, *, source: str | None = None, folder: str | Path | None = None,
         registry: PluginRegistry | None = None, options: dict[str, Any] | None = None,
         store: TicketStore | None = None) -> Loaded:
    """The chosen source's tickets, checked by `load_from` with the config's max_ticket_chars, and
    (given the `store`, read only) what a sync would close or reopen (`closed`, `back`): nothing is
    written. With a store holding tickets, a configured ticket folder that does not exist is a
    warning (they came from another source), not an error."""
    opened = open_source(config, source=source, folder=folder, registry=registry, options=options)
    loaded = load_from(opened, _settings(config)[2].max_ticket_chars,
                       folder_optional=lambda: store is not None and source is None and folder is None
                       and bool(store.list_tickets()))
    return _ask_source(opened, loaded, store) if store is not None else loaded


def _ask_source(opened: TicketSource, loaded: Loaded, store: TicketStore) -> Loaded:
    """Set `closed` and `back`: what the source says (tickets.source.ClosingSource) of the stored
    pending tickets it no longer lists, and of the discarded ones it lists again. Nothing is
    written; a source without the capability is not asked."""
    if not isinstance(opened, ClosingSource):
        return loaded
    listed = {t.id for t in loaded.tickets}
    gone = [t for t in store.list_tickets(status="pending") if t.id not in listed]
    loaded.closed = dict(opened.closed(gone)) if gone else {}
    again = [t for t in store.list_tickets(status="discarded") if t.id in listed]
    found = opened.reopened(again) if again else []
    # A list of ids (the plain form), or id -> why (what the built-in sources give).
    loaded.back = dict(found) if isinstance(found, dict) else {tid: f"{loaded.where} has it again" for tid in found}
    return loaded


def load_from(opened: TicketSource, max_ticket_chars: int, *,
              folder_optional: Callable[[], bool] = lambda: False) -> Loaded:
    """An opened source's tickets, each checked (a Ticket, one per id, within max_ticket_chars); the
    rest are per-ticket errors. A problem with the source as a whole (no folder) raises TicketError,
    except a missing folder when `folder_optional()` (asked only then): then no tickets and a warning."""
    try:
        result = opened.load()
    except MissingTicketFolder:
        if not folder_optional():
            raise
        return Loaded(warnings=[TicketFileError(str(opened.where), "no such ticket folder; the tickets already in "
                                                "the store are used (to sync another source on every command, "
                                                "set [tickets] kind, e.g. \"github\")")], where=str(opened.where))
    except MiddleError:
        raise
    except Exception as exc:  # a plugin's bug: one line naming the source, not a traceback
        raise TicketError(f"ticket source {getattr(opened, 'where', opened)} failed to load: "
                          f"{type(exc).__name__}: {exc}") from exc
    loaded = Loaded(errors=list(result.errors), warnings=list(result.warnings), where=str(opened.where))
    seen: set[str] = set()
    for ticket in result.tickets:
        where = getattr(ticket, "source", None) or getattr(ticket, "id", "?")
        if not isinstance(ticket, Ticket):
            loaded.errors.append(TicketFileError(str(where), f"the source gave a {type(ticket).__name__}, "
                                                 "not a Ticket: fix the ticket source plugin"))
        elif ticket.id in seen:
            loaded.errors.append(TicketFileError(str(where), f"ticket id {ticket.id!r} comes twice from "
                                                 f"{loaded.where}: give one of them another id"))
        elif len(ticket.description) > max_ticket_chars:  # a source that read it whole: refused here
            loaded.errors.append(TicketFileError(str(where), too_long(len(ticket.description), max_ticket_chars)))
        else:
            seen.add(ticket.id)
            loaded.tickets.append(ticket)
    return loaded


_CONTENT = ("project_id", "title", "description", "project_path", "source", "fields", "depends_on")


def sync(store: TicketStore, config: AnyConfig, *, source: str | None = None, folder: str | Path | None = None,
         registry: PluginRegistry | None = None, options: dict[str, Any] | None = None,
         pulls: bool = False) -> Loaded:
    """Load the source into the store: new tickets pending, changed ones updated (status kept),
    pending ones the source no longer has (a closed or deleted issue, a removed file) discarded,
    and back to pending when it has them again; with `pulls`, complete tickets whose pull request
    was merged or closed on GitHub become merged or discarded (one GitHub no longer has is forgotten).

    Everything is read from the source before anything is written, so a source that fails half
    way (the network) leaves the store as it was. Dependency problems (an unknown id, a cycle)
    are in `dependency_errors`; those tickets are stored but never start until fixed. An
    unchanged ticket is not written (no store lock taken).
    """
    opened = open_source(config, source=source, folder=folder, registry=registry, options=options)
    loaded = load_from(opened, _settings(config)[2].max_ticket_chars,
                       folder_optional=lambda: source is None and folder is None and bool(store.list_tickets()))
    _ask_source(opened, loaded, store)  # before any write
    states = []
    if pulls:  # (only `middle sync` asks, with the full config: the read-only view has no [github] token use)
        from orchestrator.config.settings import Config
        from orchestrator.github.pulls import read_pull_states

        if not isinstance(config, Config):
            raise TypeError("reading pull requests needs the full Config, not the read-only view")

        states = read_pull_states(store, config)  # type: ignore[arg-type]
    store_loaded(store, loaded)
    if states:
        from orchestrator.github.pulls import apply_pull_states

        loaded.pull_changes = apply_pull_states(store, states)
    return loaded


def store_loaded(store: TicketStore, loaded: Loaded) -> Loaded:
    """Copy checked tickets into the store, discard the `closed` pending ones, put those `back` to
    pending; set `new`, `discarded`, `reopened` and `dependency_errors`."""
    stored = {t.id: t for t in store.list_tickets()}
    loaded.new = [t.id for t in loaded.tickets if t.id not in stored]
    for ticket in loaded.tickets:
        before = stored.get(ticket.id)
        if before is None or any(getattr(before, f) != getattr(ticket, f) for f in _CONTENT):
            store.upsert_ticket(ticket)
    # Only a ticket still pending is discarded: one a runner claimed meanwhile (running), or that
    # finished, is left as it is (the status is compared in the same write).
    loaded.discarded = [tid for tid, why in sorted(loaded.closed.items())
                        if store.set_status_if(tid, ("pending",), "discarded", why)]
    loaded.reopened = [tid for tid in sorted(loaded.back) if store.set_status_if(tid, ("discarded",), "pending")]
    loaded.dependency_errors = check_dependencies(loaded.tickets, set(stored) | {t.id for t in loaded.tickets})
    return loaded
