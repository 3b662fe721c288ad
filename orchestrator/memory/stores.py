"""A project's stores under every backend: where a doc lives, deleting it wherever it is, reindexing
one backend's store into the configured one."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError, MemoryStoreError
from orchestrator.memory.facade import LOCAL, MemoryFacade, write_records
from orchestrator.memory.facade import backend_has_doc as _has
from orchestrator.memory.rebuild import check_rebuildable, rebuild
from orchestrator.plugins.memory_backend import MemoryBackend

log = logging.getLogger("middle.memory")


def stores(facade: MemoryFacade, project_id: str) -> dict[str, Path]:
    """The backends with a store in the project's directory, and that directory."""
    store = facade.store_dir(project_id)
    return {name: store for name, reg in facade.registry.backends.items()
            if name != "none" and facade.backend_has_store(reg.cls, project_id)}


def store_counts(facade: MemoryFacade, project_id: str) -> list[tuple[str, int | None, str]]:
    """(backend, docs, note) for every store the project has; note says which is configured
    or why a store could not be read."""
    rows: list[tuple[str, int | None, str]] = []
    for name in stores(facade, project_id):
        note = "configured" if name == facade.backend_name else ""
        try:
            with facade.other_backend(project_id, name, "list") as backend:
                rows.append((name, len(_records(backend)), note))
        except (MemoryStoreError, ConfigError) as exc:
            rows.append((name, None, f"cannot read: {exc}"))
    return rows


def locate(facade: MemoryFacade, project_id: str, docs: list[str]) -> dict[str, list[str]]:
    """For each doc, the backends whose store of the project holds it (a store that cannot
    be opened is logged and skipped)."""
    found: dict[str, list[str]] = {doc: [] for doc in docs}
    for name in stores(facade, project_id):
        try:
            with facade.other_backend(project_id, name, "lookup") as backend:
                for doc in docs:
                    if _has(backend, doc):
                        found[doc].append(name)
        except (MemoryStoreError, ConfigError) as exc:
            log.warning("cannot look into the %s store of project %s: %s", name, project_id, exc)
    return found


@dataclass
class ForgetReport:
    """What `forget` did: docs deleted per backend, and docs no store held."""

    configured: str
    store_dir: Path
    deleted: dict[str, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.deleted.values())

    def describe(self) -> str:
        """One line for the user, e.g. "1 memory doc deleted (from the bm25 store in DIR,
        where it was indexed before [memory] backend became 'hybrid')"."""
        parts = []
        for name, n in self.deleted.items():
            if name == self.configured:
                parts.append(f"{n} from {name}")
            else:
                parts.append(f"{n} from the {name} store in {self.store_dir}, where it was "
                              f"indexed before [memory] backend became {self.configured!r}")
        text = f"{self.total} memory doc(s) deleted"
        if parts:
            text += f" ({'; '.join(parts)})"
        if self.missing:
            text += (f"; {len(self.missing)} doc(s) are in no store of {self.store_dir} (deleted "
                     "already: by hand, or by a revert or discard that was stopped before it finished; "
                     "or indexed under another [memory] save_dir)")
        return text


def forget(facade: MemoryFacade, project_id: str, docs: list[str],
           indexed_by: dict[str, str | None] | None = None) -> ForgetReport:
    """Delete docs (exact texts) from the project's memory wherever they are: the configured
    backend's store first, then the store of the backend that indexed each (`indexed_by`, as
    the ticket store records it), then any other backend's store of the project."""
    report = ForgetReport(facade.backend_name, facade.store_dir(project_id))
    left = list(dict.fromkeys(docs))
    present = stores(facade, project_id)
    preferred = [n for n in dict.fromkeys((indexed_by or {}).get(d) for d in left)
                 if n in present and n != facade.backend_name]
    order = [facade.backend_name] + preferred + [n for n in present if n not in preferred]
    for name in dict.fromkeys(order):
        if not left:
            break
        if name not in present:
            continue
        try:
            with facade.other_backend(project_id, name, "delete") as backend:
                held = [d for d in left if any(_has(backend, f) for f in facade.delete_forms([d]))]
                if held:
                    forms = facade.delete_forms(held)
                    if name == facade.backend_name:  # the configured store: listings catch up
                        with facade.writing(project_id, backend, [(f, None) for f in forms]):
                            report.deleted[name] = backend.delete(forms)
                    else:
                        report.deleted[name] = backend.delete(forms)
                    left = [d for d in left if d not in held]
        except (MemoryStoreError, ConfigError) as exc:
            log.warning("cannot delete from the %s store of project %s: %s", name, project_id, exc)
    report.missing = left
    log.info("memory forget project=%s: %s", project_id, report.describe())
    return report


@dataclass
class ReindexReport:
    source: str
    target: str
    copied: int
    already: int
    backup: Path | None = None
    damage: str | None = None  # the store was too damaged to open: why; the docs were salvaged


def _records(backend: MemoryBackend) -> list[tuple[str, float | None]]:
    """(text, time) of every doc; times only from backends that keep them."""
    try:
        return [(text, when) for text, when in backend.list_records()]
    except NotImplementedError:
        raise ConfigError(f"backend {backend.name!r} cannot list its docs, so its store cannot "
                          "be reindexed") from None


def reindex(facade: MemoryFacade, project_id: str, source: str,
            from_url: str | None = None) -> ReindexReport:
    """Copy every doc of `source`'s store of the project into the configured backend, keeping
    doc times where both keep them. `from_url` says where that store is when the configuration
    no longer points there: LOCAL (under save_dir) or a PostgreSQL URL, so a project's memory
    moves from SQLite to PostgreSQL and back. With `source` the configured backend itself, in
    the place it is configured, rebuild its store: the docs are indexed afresh into a new store
    that then replaces the old one's contents (a copy of the old files is kept in a backup
    folder), so a store built with the no-model embedder is re-embedded once a model is
    installed. Either way the project's lock is held throughout: another process's writes
    wait, then land in the new store."""
    facade.registry.backend_class(source)  # ConfigError for an unknown name
    source_cls = facade.registry.backends[source].cls
    if from_url is not None:
        _check_location(from_url)
        if facade.database(source_cls, project_id, from_url) == facade.database(source_cls, project_id):
            from_url = None  # where the configuration keeps it anyway
    if source == "none" or not facade.backend_has_store(source_cls, project_id, from_url):
        database = facade.database(source_cls, project_id, from_url)
        where = database.where if database is not None else str(facade.store_dir(project_id))
        raise ConfigError(f"project {project_id!r} has no {source} store in {where}: nothing to "
                          "reindex (`middle memory stores` lists the stores the project has)")
    if source == facade.backend_name and from_url is None:
        return _rebuild(facade, project_id, source_cls)
    with facade.project_lock(project_id, "reindex"):
        with facade.other_backend(project_id, source, "reindex", url=from_url) as old:
            records = _records(old)
        fresh = _fresh(facade, records, set(facade.list_docs(project_id)))
        facade.index_records(project_id, fresh)
    return ReindexReport(source, facade.backend_name, len(fresh), len(records) - len(fresh))


def _check_location(url: str) -> None:
    if url != LOCAL and not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(f"--from-url {url.split('://')[0]!r} is neither {LOCAL!r} (the store under "
                          "[memory] save_dir) nor a PostgreSQL URL (postgresql://user@host/db)")


def _fresh(facade: MemoryFacade, records: list[tuple[str, float | None]],
           before: set[str]) -> list[tuple[str, float | None]]:
    """The records to index: as stored (cut to max_doc_chars), each text once (its last time),
    none already in `before`, oldest first as they were indexed."""
    fresh = [(facade.prepare_doc(text), when) for text, when in records]
    fresh = [(t, w) for t, w in dict((t, w) for t, w in reversed(fresh)).items() if t not in before]
    fresh.reverse()
    return fresh


def _rebuild(facade: MemoryFacade, project_id: str, cls: Any) -> ReindexReport:
    """Rebuild the configured backend's own store in place (see `memory_rebuild`)."""
    source = facade.backend_name
    if facade.database(cls, project_id) is not None and hasattr(cls, "reembed"):
        # A store in the database is re-embedded where it is, in one transaction (the
        # built-in retrieval backends: their docs' vectors are made whole, see chunking.py).
        with facade.project_lock(project_id, "reindex"):
            with facade.other_backend(project_id, source, "reindex", _own_embedder(facade)) as old:
                count = old.reembed()  # type: ignore[attr-defined]
            facade.restart_change_log(project_id)
            facade.release(project_id)  # an open instance would still refuse the old store
        return ReindexReport(source, source, count, 0)
    if facade.database(cls, project_id) is not None and hasattr(cls, "rebuild_in_place"):
        # What a backend derives from its docs (a graph, facts) rebuilt where the store is, in
        # one transaction of it (backends.rederive): docs another program wrote get theirs.
        with facade.project_lock(project_id, "reindex"):
            with facade.other_backend(project_id, source, "reindex", _own_embedder(facade)) as old:
                count = old.rebuild_in_place()  # type: ignore[attr-defined]
            facade.restart_change_log(project_id)
            facade.release(project_id)
        return ReindexReport(source, source, count, 0)
    if facade.database(cls, project_id) is not None:
        raise ConfigError(f"the {source} store of project {project_id!r} is in "
                          f"{facade.where(project_id)}, which cannot be rebuilt in place yet: "
                          "`middle memory export` it, delete its docs and add them again")
    if not cls.store_files:
        raise ConfigError(f"backend {source!r} does not say which files hold its store, so it "
                          "cannot be rebuilt in place: `middle memory export`, move the store "
                          "away and add the docs again")
    with facade.rebuilding(project_id) as store:
        files = [name for name in cls.store_files if (store / name).is_file()]
        check_rebuildable(store, source, files)
        damage = None
        try:
            with facade.other_backend(project_id, source, "reindex", _own_embedder(facade)) as old:
                records = _records(old)
        except MemoryStoreError as exc:  # too damaged to open: rebuild from what can be read
            records, damage = _salvaged(cls, store, exc), str(exc)
        fresh = _fresh(facade, records, set())
        facade.release(project_id)

        def build(staging: Path) -> None:
            backend = cls(staging, facade.options, facade.llm)
            try:
                write_records(backend, fresh)
            finally:
                backend.close()

        backup = rebuild(store, source, files, build)
        facade.restart_change_log(project_id)  # every doc's time and place may have moved
    return ReindexReport(source, source, len(fresh), len(records) - len(fresh), backup, damage)


def _salvaged(cls: Any, store: Path, error: MemoryStoreError) -> list[tuple[str, float | None]]:
    """The docs the backend can still read from its damaged store; `error` again (saying so)
    when it can read none: a rebuild must never turn a damaged memory into an empty one."""
    try:
        records = list(cls.salvage_records(store))
    except NotImplementedError:
        records = []
    if not records:
        raise MemoryStoreError(f"{error}. No doc could be read from it, so `middle memory "
                               "reindex` cannot rebuild it: restore the file from a backup, or "
                               "move it away to start an empty memory") from None
    log.info("the %s store in %s is damaged (%s): rebuilding it from the %d doc(s) that could "
             "still be read", cls.name, store, error, len(records))
    return [(str(text), None if when is None else float(when)) for text, when in records]


def _own_embedder(facade: MemoryFacade) -> Any:
    """The configured options with `embedder = "auto"` (a store's own embedder), to read a
    store built with another embedder than the one now asked for."""
    fields = getattr(facade.backend_cls.Options, "model_fields", {})
    raw = facade.options.model_dump()
    if "embedder" in fields:
        raw["embedder"] = "auto"
    return facade.registry.backend_options(facade.backend_name, raw)
