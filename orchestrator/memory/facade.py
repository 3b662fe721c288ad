"""The memory facade: one store per project, per-project locks, logged calls, the memory contract's shapes."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from orchestrator.errors import ConfigError, MemoryStoreError
from orchestrator.memory.changelog import CHANGES_DIR, ChangeLog, PgChangeLog, store_mark
from orchestrator.memory.curation import curate, curation_notes, current_text, pinned_docs
from orchestrator.memory.explain import signals_for, why_line
from orchestrator.memory.format import (  # noqa: F401 - re-exported: the facade's text rules
    CUT_MARKER,
    DEFAULT_MAX_DOC_CHARS,
    DEFAULT_MAX_QUERY_CHARS,
    DEFAULT_MAX_REQUEST_CHARS,
    DEFAULT_MEMORIES_BUDGET_CHARS,
    DEFAULT_RECENT_SHARE,
    DEFAULT_RECENT_TICKETS,
    DEFAULT_RELATED_WINDOW,
    DOC_ID_CHARS,
    MEMORIES_HEADER,
    MIN_MAX_DOC_CHARS,
    MIN_MAX_QUERY_CHARS,
    MIN_MEMORIES_BUDGET_CHARS,
    Block,
    block_layout,
    doc_id,
    format_block,
    format_memories,
    memories_layout,
    pins_within,
    place_pins,
    shortest_unique,
    truncate_doc,
)
from orchestrator.memory.lock import AdvisoryLocks, FileLocks
from orchestrator.memory.private import cut_private
from orchestrator.memory.rebuild import read_epoch, recover
from orchestrator.memory.timeline import expired_ids
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.plugins.memory_backend import (
    ConversationContext,
    MemoryBackend,
    MemoryDatabase,
    MemoryRecord,
    RetrieveResult,
    TextLLM,
)
from tickets.model import validate_project_id

log = logging.getLogger("middle.memory")

# Project ids never start with '.', so this directory can never be a project's store.
LOCK_DIR_NAME = ".locks"
# Calls that only read the store. With the store in a database they take no cross-process lock:
# each read is one snapshot there, and a write in progress on another machine never holds it up
# (the stores lock their own writes, see backends/pg_storage.py).
READ_OPS = frozenset({"retrieve", "explain", "list", "lookup", "context"})
LOCAL = "local"  # a store's location: under save_dir, whatever [memory] url says


class MemoryArgumentError(MemoryStoreError, ValueError):
    """A memory call with bad arguments: refused before any I/O, with what to pass instead.

    A MemoryStoreError so callers that go on without memory do so, and the CLI prints one line;
    a ValueError for code that checks arguments the usual way.
    """


class MemoryRequestTooLarge(MemoryArgumentError):
    """A client's call whose docs or queries hold more than [memory] max_request_chars in all
    (the HTTP API answers 413): refused before any work, so no call holds the project long."""


class RequestGone(MemoryStoreError):
    """The client of a memory call went away while its docs were embedded: the rest of the work
    was dropped and nothing was stored."""


# Docs are embedded outside the project's locks in batches of about this many characters, and
# between batches the facade asks whether the client is still there (`gone`).
EMBED_BATCH_CHARS = 20_000


def embed_batches(docs: list[str], limit: int = EMBED_BATCH_CHARS) -> Iterator[list[str]]:
    """The docs in order, in batches of at most `limit` characters (a longer doc alone)."""
    batch: list[str] = []
    size = 0
    for doc in docs:
        if batch and size + len(doc) > limit:
            yield batch
            batch, size = [], 0
        batch.append(doc)
        size += len(doc)
    if batch:
        yield batch


def _check_texts(texts: Any, what: str, example: str, allow_empty: bool) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise MemoryArgumentError(
            f"{what} must be a list, not a single {type(texts).__name__}: pass a list of {what}, "
            f"e.g. [{example}]"
        )
    if not isinstance(texts, (list, tuple)):
        raise MemoryArgumentError(
            f"{what} must be a list of strings, e.g. [{example}], not {type(texts).__name__}"
        )
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise MemoryArgumentError(f"{what}[{i}] is {type(text).__name__}, not str: pass text")
        if not allow_empty and not text.strip():
            raise MemoryArgumentError(f"{what}[{i}] is empty: pass only {what} with some text")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MemoryArgumentError(
                f"{what}[{i}] is not valid Unicode (a lone surrogate at index {exc.start}): "
                "decode the text properly first, e.g. with errors='replace'"
            ) from None
    return list(texts)


# More docs than any block could show; a larger count reaches FAISS and NumPy as a C integer that
# overflows (k = 10**20 was a 503 "OverflowError" instead of a bad request).
MAX_NUM_TO_RETRIEVE = 10_000


def _check_count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NUM_TO_RETRIEVE:
        raise MemoryArgumentError(f"{what} must be a whole number of at least 1 (at most "
                                  f"{MAX_NUM_TO_RETRIEVE:,}), not {value!r}")
    return value


def _check_setting(value: Any, key: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"[memory] {key} must be a whole number of at least {minimum}, "
                          f"not {value!r}")
    return value


def backend_has_doc(backend: MemoryBackend, doc: str) -> bool:
    """Whether an open backend holds exactly `doc` (MemoryBackend.has_doc, read as a bool)."""
    return bool(backend.has_doc(doc))


def docs_by_id(backend: MemoryBackend, prefix: str) -> list[str]:
    """The docs of an open backend whose id starts with `prefix` (MemoryBackend.docs_by_id: a
    third-party backend that does not override it is listed whole, as before). Each answer is
    checked against the id itself: a store's answer is untrusted."""
    found = backend.docs_by_id(prefix)
    return list(dict.fromkeys(d for d in found if isinstance(d, str) and doc_id(d).startswith(prefix)))


def docs_by_ids(backend: MemoryBackend, prefixes: list[str]) -> list[str]:
    """The docs of an open backend whose id starts with one of `prefixes`, each once
    (MemoryBackend.docs_by_ids), checked against the ids as docs_by_id's are."""
    wanted = tuple(dict.fromkeys(prefixes))
    found = backend.docs_by_ids(list(wanted)) if wanted else []
    return list(dict.fromkeys(d for d in found if isinstance(d, str) and doc_id(d).startswith(wanted)))


def ids_sharing(backend: MemoryBackend, prefixes: list[str]) -> list[str] | None:
    """The ids of an open backend's docs that start with any of `prefixes`, in one call where
    the backend can: its docs_by_ids, else its list_ids (ids alone suffice to tell docs
    apart), else its own docs_by_id per prefix; None when it has none of them (its only
    lookup, the default, lists every text: too much for each block)."""
    cls = type(backend)
    if cls.docs_by_ids is MemoryBackend.docs_by_ids:
        ids = backend.list_ids()
        if ids is not None:
            wanted = tuple(dict.fromkeys(prefixes))
            return list(dict.fromkeys(i for i in ids if isinstance(i, str) and i.startswith(wanted)))
        if cls.docs_by_id is MemoryBackend.docs_by_id:
            return None
    return [doc_id(d) for d in docs_by_ids(backend, prefixes)]


def write_records(backend: MemoryBackend, records: list[tuple[str, float | None]]) -> None:
    """Index (text, time) pairs into an open backend: with their times where it keeps times."""
    if backend.keeps_times and any(w is not None for _, w in records):
        backend.index_records([MemoryRecord(t, timestamp=w) for t, w in records])
    else:
        backend.index([t for t, _ in records])


def _without(result: RetrieveResult, gone: set[str], k: int) -> RetrieveResult:
    """A retrieve result without the docs whose ids are in `gone` (expired), at most k docs;
    the backend's supersede marks follow the docs that stay."""
    keep = [pos for pos, doc in enumerate(result["docs"]) if doc_id(doc) not in gone][:k]
    at = {old: new for new, old in enumerate(keep)}
    out: RetrieveResult = {"question": result["question"], "docs": [result["docs"][p] for p in keep],
                           "doc_scores": [result["doc_scores"][p] for p in keep]}
    marks = [{**m, "doc": at[m["doc"]], "by": at[m["by"]]} for m in result.get("superseded", [])
             if m.get("doc") in at and m.get("by") in at]
    if marks:
        out["superseded"] = marks
    return out


class MemoryFacade:
    """Opens one backend instance per project at `<save_dir>/<project_id>/` and serialises its calls.

    A thread lock guards a project within this process; a file lock in `<save_dir>/.locks/`
    guards it across processes on one machine. With a PostgreSQL `url` and a backend that can
    keep its store there (`shares_database`: every built-in one), the store is the project's
    rows in that database, shared by every machine: an advisory lock in it makes the project's
    writes take turns across processes and machines, and reads (READ_OPS) take no lock there.
    Bad arguments are refused before any I/O with a MemoryArgumentError; every other error
    comes out as MemoryStoreError naming the absolute store path, so callers can log it and go
    on (memory failures never stop a ticket).

    Size caps: a doc longer than max_doc_chars is cut on index (see `prepare_doc`), or refused
    with `refuse_long=True` (what a person or a client sends: the CLI and the HTTP API); a
    query longer than max_query_chars is refused before any backend work (the middle agent's
    own recall cuts its query with `cut_query` first); `format_memories` keeps the recalled
    block within memories_budget_chars.
    """

    def __init__(
        self,
        save_dir: str | Path,
        backend: str,
        options: dict[str, Any] | None,
        registry: PluginRegistry,
        *,
        llm: TextLLM | None = None,
        num_to_retrieve: int = 5,
        lock_timeout_s: float = 120.0,
        max_doc_chars: int = DEFAULT_MAX_DOC_CHARS,
        max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
        max_request_chars: int = DEFAULT_MAX_REQUEST_CHARS,
        memories_budget_chars: int = DEFAULT_MEMORIES_BUDGET_CHARS,
        recent_tickets: int = DEFAULT_RECENT_TICKETS,
        recent_share: float = DEFAULT_RECENT_SHARE,
        related_window: int = DEFAULT_RELATED_WINDOW,
        url: str | None = None,
    ):
        if backend == "none":
            raise ConfigError("backend 'none' means memory off: do not build a MemoryFacade for it")
        self.num_to_retrieve = _check_setting(num_to_retrieve, "num_to_retrieve", 1)
        self.max_doc_chars = _check_setting(max_doc_chars, "max_doc_chars", MIN_MAX_DOC_CHARS)
        self.max_query_chars = _check_setting(max_query_chars, "max_query_chars", MIN_MAX_QUERY_CHARS)
        self.max_request_chars = _check_setting(max_request_chars, "max_request_chars", MIN_MAX_QUERY_CHARS)
        self.memories_budget_chars = _check_setting(
            memories_budget_chars, "memories_budget_chars", MIN_MEMORIES_BUDGET_CHARS
        )
        self.recent_tickets = _check_setting(recent_tickets, "recent_tickets", 0)
        self.related_window = _check_setting(related_window, "related_window", 0)
        if isinstance(recent_share, bool) or not isinstance(recent_share, (int, float)) or not 0 <= recent_share <= 1:
            raise ConfigError(f"[memory] recent_share must be a number from 0 to 1, not {recent_share!r}")
        self.recent_share = float(recent_share)
        self.save_dir = Path(save_dir).expanduser().resolve()
        self.backend_name = backend
        self.registry = registry
        self.backend_cls = registry.backend_class(backend)
        self.options = registry.backend_options(backend, options or {})  # ConfigError up front
        self.llm = llm
        self.lock_timeout_s = lock_timeout_s
        # The database of the shared stores, when the configured backend can keep one there
        # (every built-in one can); a plugin backend that cannot keeps its stores under save_dir.
        self.url = url if url and self.backend_cls.shares_database else None
        if url and not self.url:
            log.info(
                "memory backend %r keeps its stores per machine in %s ([memory] url is "
                "used by backends that can share a database)",
                backend,
                self.save_dir,
            )
        self._locks_across: FileLocks | AdvisoryLocks = (
            AdvisoryLocks(self.url, lock_timeout_s)
            if self.url
            else FileLocks(self.save_dir / LOCK_DIR_NAME, lock_timeout_s)
        )
        self._backends: dict[str, MemoryBackend] = {}
        # The rebuild token of the store each open backend was opened on (see memory_rebuild):
        # another process's `middle memory reindex` changes it, and the backend is reopened.
        self._epochs: dict[str, str | None] = {}
        self._rebuilding: set[str] = set()  # projects this facade is rebuilding (under their locks)
        self._depth: dict[str, int] = {}  # nested holds of a project's cross-process lock
        self._locks: dict[str, threading.RLock] = {}
        self._master = threading.Lock()
        # What people did to the project's memory (pins, supersede links: memory.curation), read
        # afresh on every recall: project id -> its states. Set by Services from the ticket
        # store; None (a bare facade, the benchmarks): recall as the backend ranks.
        self.state_source: Callable[[str], Mapping[str, Any]] | None = None
        self._curation_sent: dict[str, tuple[int, int]] = {}  # see _sync_curation

    # -- paths and locks -------------------------------------------------------------------
    def store_dir(self, project_id: str) -> Path:
        return self.save_dir / validate_project_id(project_id)

    def lock_path(self, project_id: str) -> Path:
        """The project's lock file, kept apart from every store (project 'x.lock' is no clash)."""
        return self.save_dir / LOCK_DIR_NAME / f"{validate_project_id(project_id)}.lock"

    def database(self, cls: type[MemoryBackend], project_id: str, url: str | None = None
                 ) -> MemoryDatabase | None:
        """Where backend `cls` keeps the project's store in the shared database, or None (its
        store is `store_dir(project_id)`). `url`: the store at that location instead (LOCAL:
        under save_dir; a PostgreSQL URL: in that database), as `middle memory reindex
        --from-url` reads a store the configuration no longer points at."""
        where = self.url if url is None else (None if url == LOCAL else url)
        if where and cls.shares_database:
            return MemoryDatabase(where, validate_project_id(project_id))
        return None

    def open_backend(self, cls: type[MemoryBackend], project_id: str, options: Any,
                     url: str | None = None) -> MemoryBackend:
        """A new instance of backend `cls` on the project's store (call under its locks)."""
        database = self.database(cls, project_id, url)
        store = self.store_dir(project_id)
        if database is not None:
            return cls(store, options, self.llm, database=database)  # type: ignore[call-arg]
        return cls(store, options, self.llm)

    def backend_has_store(self, cls: type[MemoryBackend], project_id: str, url: str | None = None) -> bool:
        """Whether backend `cls` has a store of the project (in the database or on disk)."""
        database = self.database(cls, project_id, url)
        if database is not None:
            return cls.store_exists(self.store_dir(project_id), database=database)  # type: ignore[call-arg]
        return cls.store_exists(self.store_dir(project_id))

    def change_log(self, project_id: str) -> ChangeLog | PgChangeLog:
        """The project's doc change log (memory.changelog): a file beside the stores, or, for a
        store in the shared database (written from other machines too), a table there."""
        validate_project_id(project_id)
        if isinstance(self._locks_across, AdvisoryLocks):
            return PgChangeLog(self._locks_across.pool, project_id, self._locks_across.where)
        return ChangeLog(self.save_dir / CHANGES_DIR / f"{project_id}.sqlite")

    def note_writes(self, project_id: str, records: list[tuple[str, float | None]]) -> None:
        """Note in the change log the docs a write to the configured store is about to touch
        ((text, time) each; call under the project's locks, before the write): every writer
        of docs comes through here, so a listing in any process catches up with it."""
        now = time.time() if self.backend_cls.keeps_times else None
        self.change_log(project_id).note([(text, now if when is None else when) for text, when in records])

    @contextmanager
    def writing(self, project_id: str, backend: MemoryBackend,
                records: list[tuple[str, float | None]]) -> Iterator[None]:
        """`with facade.writing(project, backend, records): backend.index(...)`: one write to
        the configured store (call under the project's locks). Before it, the docs are noted
        (note_writes), and the log started over instead when the store's fingerprint is not
        the one the last write through here left (something else wrote the docs since);
        after it, the new fingerprint is recorded, so a listing that catches up (memory.
        catalog) knows whether anything but the facade wrote the docs meanwhile."""
        changes = self.change_log(project_id)
        before = store_mark(backend)
        if before is not None and changes.mark() != before:
            log.info("the %s store of project %s was written outside middle since its last write "
                     "here: listings list it again", self.backend_name, project_id)
            changes.restart()
        self.note_writes(project_id, records)
        yield
        if before is not None:
            changes.set_mark(store_mark(backend))

    def restart_change_log(self, project_id: str) -> None:
        """Every listing of the project lists its store again (after a rebuild of it)."""
        self.change_log(project_id).restart()

    def _thread_lock(self, project_id: str) -> threading.RLock:
        with self._master:
            return self._locks.setdefault(project_id, threading.RLock())

    @contextmanager
    def _locked(self, project_id: str, op: str) -> Iterator[MemoryBackend]:
        """The project's configured backend, under the project's thread and file locks."""
        with self._project_locks(project_id, op) as store:
            backend = self._backend(project_id, store)
            # what another process or program wrote since: caught up before this call reads it
            backend.catch_up()
            yield backend

    @contextmanager
    def other_backend(self, project_id: str, name: str, op: str, options: Any = None,
                      url: str | None = None) -> Iterator[MemoryBackend]:
        """Backend `name`'s store of the project under the project's locks: the configured
        backend as this facade keeps it open, or (another backend's store left by a change of
        [memory] backend, `options` given, or another location `url`, see `database`) a fresh
        instance, closed afterwards. Another backend opens with its default options, so its
        store's own embedder."""
        if name == self.backend_name and options is None and url is None:
            with self._locked(project_id, op) as backend:
                yield backend
            return
        cls = self.registry.backend_class(name)
        options = options if options is not None else self.registry.backend_options(name, {})
        in_database = self.database(cls, project_id, url) is not None
        with self._project_locks(project_id, op, in_database):
            backend = self.open_backend(cls, project_id, options, url)
            try:
                yield backend
            finally:
                backend.close()

    def release(self, project_id: str) -> None:
        """Close the project's open backend (before its store is rebuilt)."""
        with self._thread_lock(project_id):
            backend = self._backends.pop(project_id, None)
            if backend is not None:
                backend.close()

    @contextmanager
    def rebuilding(self, project_id: str) -> Iterator[Path]:
        """`with facade.rebuilding(project) as store_dir:` the project's locks, held for a whole
        rebuild of its store, during which the rebuild's journal is this facade's own (not one
        a killed process left to recover)."""
        with self._project_locks(project_id, "reindex") as store:
            self._rebuilding.add(project_id)
            try:
                yield store
            finally:
                self._rebuilding.discard(project_id)

    def project_lock(self, project_id: str, op: str) -> Any:
        """`with facade.project_lock(project, op) as store_dir:` the project's locks alone."""
        return self._project_locks(project_id, op)

    @contextmanager
    def _project_locks(self, project_id: str, op: str, in_database: bool = True) -> Iterator[Path]:
        """The project's thread lock and cross-process lock (`in_database`: the store the call
        uses is in the database, so a read takes no cross-process lock)."""
        store = self.store_dir(project_id)  # ConfigError for an unsafe id, before any I/O
        with self._thread_lock(project_id), self._held_across(project_id, op, in_database):
            try:
                try:
                    store.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise MemoryStoreError(
                        f"memory {op} for project {project_id!r}: cannot use store {store} "
                        f"({exc}); check the directory's permissions or [memory] save_dir"
                    ) from exc
                if project_id not in self._rebuilding:
                    recover(store)  # a reindex killed half-way: roll it back or finish it
                yield store
            except (MemoryStoreError, ConfigError):
                raise
            except Exception as exc:
                raise MemoryStoreError(
                    f"memory {op} failed for project {project_id!r} with backend "
                    f"{self.backend_name!r} at {self.where(project_id)}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc

    @contextmanager
    def _held_across(self, project_id: str, op: str, in_database: bool) -> Iterator[None]:
        """The cross-process lock, taken by the outermost of nested holds (call under the
        project's thread lock): a file lock taken again by its own process waits for itself.
        A read of a store in the database takes none (see READ_OPS)."""
        depth = self._depth.get(project_id, 0)
        if not depth and self.url and in_database and op in READ_OPS:
            yield
            return
        if depth:
            self._depth[project_id] = depth + 1
            try:
                yield
            finally:
                self._depth[project_id] = depth
            return
        with self._locks_across.hold(project_id, op):
            self._depth[project_id] = 1
            try:
                yield
            finally:
                self._depth[project_id] = 0

    def where(self, project_id: str) -> str:
        """The configured backend's store of the project, for messages: the database (without
        its password) or the absolute store path."""
        database = self.database(self.backend_cls, project_id)
        return database.where if database is not None else str(self.store_dir(project_id))

    def has_store(self, project_id: str) -> bool:
        """Whether the project has a store of the configured backend. Read-only commands and
        API routes ask first, so on a project without one they answer empty and create
        nothing (no directory, no lock file); runs call the backend whatever the answer."""
        return self.backend_has_store(self.backend_cls, project_id)

    def agent_context(self, project_id: str) -> str:
        """The backend's standing text for the middle agent (mental models), or ''."""
        if not self.has_store(project_id):
            return ""
        with self._locked(project_id, "context") as backend:
            return backend.agent_context() or ""

    def using(self, project_id: str, op: str) -> Any:
        """`with facade.using(project, "reflect") as backend:` a backend's own operation (beyond
        index/retrieve/delete) under the project's locks, errors worded like the facade's."""
        return self._locked(project_id, op)

    def _backend(self, project_id: str, store: Path) -> MemoryBackend:
        """The project's open backend (call under its locks); reopened when another process
        rebuilt the store since it was opened, so no write goes to the old contents."""
        epoch = read_epoch(store)
        backend = self._backends.get(project_id)
        if backend is not None and self._epochs.get(project_id) != epoch:
            log.info(
                "the %s store of project %s was rebuilt by `middle memory reindex`: reopening it",
                self.backend_name,
                project_id,
            )
            del self._backends[project_id]
            try:
                backend.close()
            except Exception:  # its old contents are gone anyway: open the new ones regardless
                log.exception("closing the replaced %s store of project %s failed", self.backend_name, project_id)
            backend = None
        if backend is None:
            backend = self.open_backend(self.backend_cls, project_id, self.options)
            self._backends[project_id] = backend
            self._epochs[project_id] = epoch
        return backend

    # -- size caps ----------------------------------------------------------------------------
    def prepare_doc(self, doc: str, *, refuse_long: bool = False) -> str:
        """The exact text `index([doc])` stores: doc itself, or cut to max_doc_chars with a marker
        (`refuse_long`: a MemoryArgumentError naming the limit instead, for text a person or a
        client sent, who should know their doc was not kept whole).

        Keep this string (not the original) if the doc must be deleted later; passing it to
        index again stores it unchanged. Its `<private>...</private>` spans are cut first
        (memory.private): every path into memory comes through here, so none stores them.
        """
        (doc,) = _check_texts([doc], "docs", "text", allow_empty=True)
        if not doc.strip():  # one doc, a person's or a client's: said as one, not as docs[0]
            raise MemoryArgumentError("the doc is empty: give it some text to store (nothing was stored)")
        doc = cut_private(doc)
        if not doc.strip():
            raise MemoryArgumentError("the doc is all <private>...</private>: nothing is left "
                                      "to store, so nothing was stored")
        if refuse_long and len(doc) > self.max_doc_chars:
            raise MemoryArgumentError(
                f"a doc of {len(doc):,} characters is over [memory] max_doc_chars "
                f"({self.max_doc_chars:,}): split it into smaller docs, or raise the limit in "
                "middle.toml (the project's own docs, a ticket's summary or an import, are cut "
                "to it instead)"
            )
        stored = truncate_doc(doc, self.max_doc_chars)
        if stored is not doc:
            log.warning(
                "memory doc of %d chars cut to %d ([memory] max_doc_chars = %d)",
                len(doc),
                len(stored),
                self.max_doc_chars,
            )
        return stored

    def check_queries(self, queries: Any) -> list[str]:
        """The queries as a list of strings, each within max_query_chars; a MemoryArgumentError
        otherwise, before any I/O (a 4 MB query once held every memory call of its project)."""
        queries = _check_texts(queries, "queries", "question", allow_empty=True)
        for query in queries:
            if len(query) > self.max_query_chars:
                raise MemoryArgumentError(
                    f"a query of {len(query):,} characters is over [memory] max_query_chars "
                    f"({self.max_query_chars:,}): send a shorter one (recall needs the key words, "
                    "not a whole document), or raise the limit in middle.toml"
                )
        self.check_request(queries, "queries")
        return queries

    def check_request(self, texts: list[str], what: str) -> None:
        """A MemoryRequestTooLarge when the texts of one call hold more than max_request_chars in
        all: each within its own cap, 20 docs of 20,000 characters once held the project 51 s."""
        total = sum(len(t) for t in texts)
        if total > self.max_request_chars:
            raise MemoryRequestTooLarge(
                f"the {len(texts):,} {what} of this call hold {total:,} characters in all, over "
                f"[memory] max_request_chars ({self.max_request_chars:,}): send them in several "
                "smaller calls, or raise max_request_chars under [memory] in middle.toml"
            )

    def cut_query(self, query: str) -> str:
        """The middle agent's own query within max_query_chars: its head (a ticket's title and
        the start of its description say what it is about)."""
        if len(query) <= self.max_query_chars:
            return query
        log.info("memory query of %d chars cut to %d ([memory] max_query_chars)", len(query), self.max_query_chars)
        return query[: self.max_query_chars]

    def format_memories(self, results: list[RetrieveResult]) -> str:
        """`format_memories` with this facade's memories_budget_chars."""
        return format_memories(results, self.memories_budget_chars)

    def format_block(
        self,
        recent: list[tuple[str, str]],
        results: list[RetrieveResult],
        limit: int | None = None,
        project_id: str | None = None,
    ) -> str:
        """The block's text (see `block`); without `project_id`, no pins and no ids."""
        if project_id is None:
            docs = [doc for result in results for doc in result.get("docs", [])]
            return format_block(recent, docs, self.memories_budget_chars, self.recent_share, limit)
        return self.block(project_id, recent, results, limit).text

    def block(
        self,
        project_id: str,
        recent: list[tuple[str, str]],
        results: list[RetrieveResult],
        limit: int | None = None,
        leave_out: list[str] | tuple[str, ...] = (),
    ) -> Block:
        """The "Memories invoked" block the agent is shown: "Recent work" (`recent`: (doc, date),
        newest first) within [memory] recent_share of memories_budget_chars, then "Related work
        from any time": the project's pinned docs (always, within the budget) and the first
        `limit` related docs of `results` not shown as recent. Every memory carries its id (the
        agent names the ones it used); a superseded one says by which; a recent doc that was
        superseded is shown as its replacement. `leave_out`: docs the related part must not
        show (the newest [memory] related_window tickets)."""
        skip = set(leave_out)
        docs = [doc for result in results for doc in result.get("docs", []) if doc not in skip]
        states = self.curation_state(project_id)
        pinned = pinned_docs(states)
        expired = expired_ids(states)
        recent = [(current_text(states, doc), when) for doc, when in recent
                  if doc_id(doc) not in expired]
        marks = {result["docs"][mark["doc"]]: result["docs"][mark["by"]]
                 for result in results for mark in result.get("superseded", [])}
        # Pins first within a share of the related part's room (at least what the recent part
        # leaves it), then the `limit` related docs (a superseded one right below its
        # replacement is history, not one of them), then the other pins as room is left.
        budget = self.memories_budget_chars
        room = budget - (int(budget * self.recent_share) if recent else 0)
        shown = {doc for doc, _ in recent}
        idents: dict[str, str] = {}
        looked: set[str] = set()
        while True:  # ids as long as it takes for the docs shown to be told apart (twice, at most)
            notes = {doc: f"superseded by [{idents.get(by) or doc_id(by)[:DOC_ID_CHARS]}]"
                     for doc, by in marks.items()}
            placed = place_pins(pinned, [d for d in dict.fromkeys(docs) if d not in shown], room, limit, notes)
            block = block_layout(recent, placed, budget, self.recent_share, None, ids=True, notes=notes,
                                 idents=idents)
            named = [d for d, _ in block.parts if d is not None]
            named += [marks[d] for d in named if d in marks]
            unseen = [d for d in dict.fromkeys(named) if d not in looked]
            if not unseen:
                return block
            looked.update(unseen)
            idents.update(self.block_ids(project_id, unseen))

    def block_ids(self, project_id: str, docs: list[str]) -> dict[str, str]:
        """The docs whose id the block must show longer than DOC_ID_CHARS, with that id (see
        short_ids)."""
        shown = self.short_ids(project_id, [doc_id(doc) for doc in docs])
        return {doc: shown[ident] for doc in docs
                if len(shown.get(ident := doc_id(doc), "")) > DOC_ID_CHARS}

    def doc_ids(self, project_id: str, docs: list[str]) -> dict[str, str]:
        """Each of `docs` (texts) with the id a person is shown for it (short_ids)."""
        shown = self.short_ids(project_id, [doc_id(doc) for doc in docs])
        return {doc: shown[doc_id(doc)] for doc in docs}

    def short_ids(self, project_id: str, idents: list[str]) -> dict[str, str]:
        """Each whole id of `idents` with the id a person is shown for it: the shortest prefix,
        DOC_ID_CHARS at least, no other doc's id in the store starts with (`shortest_unique`;
        one lookup of all their first DOC_ID_CHARS, `ids_sharing`: a query per id took 0.1 s
        a recall on PostgreSQL under load). A backend with none of the lookups (only a
        listing of the store's texts) is not asked: its ids stay at DOC_ID_CHARS, which a
        lookup refuses when two docs share them (Curator.find)."""
        out = {ident: ident[:DOC_ID_CHARS] for ident in idents}
        if not idents or not self.has_store(project_id):
            return out
        with self._locked(project_id, "lookup") as backend:
            found = ids_sharing(backend, [i[:DOC_ID_CHARS] for i in out])
            if found is None:
                return out
        for ident in out:
            out[ident] = shortest_unique(ident, [other for other in found if other.startswith(ident[:DOC_ID_CHARS])])
        return out

    def pins_shown(self, project_id: str) -> tuple[int, int]:
        """(how many pinned docs the block is sure to show, how many there are): past the first
        number, a pin is shown only when a query finds it or room is left (place_pins)."""
        pinned = pinned_docs(self.curation_state(project_id))
        budget = self.memories_budget_chars
        return pins_within(pinned, budget - int(budget * self.recent_share)), len(pinned)

    def explain(self, project_id: str, query: str, result: RetrieveResult,
                idents: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """Why each doc of `result` (what retrieve gave for `query`) was recalled: its signals
        (memory.explain), `why`, the line a person reads, and `id`, the doc's id as a person
        is shown it. `idents`: docs with the id they are shown by where longer than
        DOC_ID_CHARS (a Block's, which looked them up); None: looked up here (short_ids)."""
        docs = list(result.get("docs", []))
        if not docs:
            return []
        if idents is None:
            idents = self.doc_ids(project_id, docs)
        with self._locked(project_id, "explain") as backend:
            try:
                extra = list(backend.explain(query, docs))
            except Exception as exc:  # an explanation never fails a recall
                log.warning("memory explain failed for project %s: %s", project_id, exc)
                extra = [{} for _ in docs]
        signals = signals_for(query, result, extra, self.curation_state(project_id), self.backend_cls.recall,
                              idents)
        return [{**s, "id": idents.get(d) or doc_id(d)[:DOC_ID_CHARS], "why": why_line(s)}
                for d, s in zip(docs, signals)]

    def _sync_curation(self, project_id: str, backend: MemoryBackend, states: Mapping[str, Any]) -> None:
        """Give the backend people's marks when they changed since this process last gave
        them (MemoryBackend.apply_curation: a summary of many docs is rebuilt with them)."""
        notes = curation_notes(states)
        key = (id(backend), hash(tuple(sorted(notes.items()))))
        if self._curation_sent.get(project_id) == key:
            return
        try:
            backend.apply_curation(notes)
        except Exception as exc:  # never a reason to fail a recall: the marks are retried
            log.warning("memory curation marks of project %s not applied: %s", project_id, exc)
            return
        self._curation_sent[project_id] = key

    def derived_texts(self, project_id: str) -> list[tuple[str, str]]:
        """The texts retrieve can return that are not docs (MemoryBackend.derived_texts)."""
        if not self.has_store(project_id):
            return []
        with self._locked(project_id, "lookup") as backend:
            return list(backend.derived_texts())

    def curation_state(self, project_id: str) -> Mapping[str, Any]:
        """The project's curation states (memory.curation), or none when they cannot be read:
        recall then goes on as the backend ranks (memory never stops a ticket)."""
        if self.state_source is None:
            return {}
        try:
            return self.state_source(project_id)
        except Exception as exc:
            log.warning("memory curation of project %s unreadable; recalling without it: %s", project_id, exc)
            return {}

    # -- the memory contract ------------------------------------------------------------------------
    def retrieve(
        self,
        project_id: str,
        queries: list[str],
        num_to_retrieve: int | None = None,
        *,
        if_exists: bool = False,
    ) -> list[RetrieveResult]:
        """The contract's retrieve. `if_exists`: a project without a store of the configured
        backend answers with empty results and gets none created (read-only callers)."""
        validate_project_id(project_id)
        queries = self.check_queries(queries)
        k = self.num_to_retrieve if num_to_retrieve is None else _check_count(num_to_retrieve, "num_to_retrieve")
        if if_exists and not self.has_store(project_id):
            return [{"question": q, "docs": [], "doc_scores": []} for q in queries]
        started = time.perf_counter()
        states = self.curation_state(project_id)
        expired = expired_ids(states)  # past their valid_until: out of recall
        with self._locked(project_id, "retrieve") as backend:
            self._sync_curation(project_id, backend, states)
            results = backend.retrieve(queries, min(k + len(expired), MAX_NUM_TO_RETRIEVE))
        if expired:
            results = [_without(result, expired, k) for result in results]
        if states:  # a superseded doc right below its replacement (memory.curation)
            results = [curate(result, states, k) for result in results]
        self._log(
            "retrieve", project_id, started, queries=len(queries), docs=sum(len(r.get("docs", [])) for r in results)
        )
        return results

    def index(self, project_id: str, docs: list[str], *, refuse_long: bool = False,
              gone: Callable[[], bool] | None = None) -> None:
        """Index docs, each cut to max_doc_chars (`refuse_long`: refused, see prepare_doc, and
        the call refused over max_request_chars: what a client sent). The docs are embedded
        before the project's locks are taken (MemoryBackend.embed_ahead), so other memory calls
        of the project go on meanwhile; `gone()` is asked between batches, and True (the client
        went away) drops the rest of the work with a RequestGone."""
        validate_project_id(project_id)
        docs = [
            self.prepare_doc(d, refuse_long=refuse_long) for d in _check_texts(docs, "docs", "text", allow_empty=False)
        ]
        if refuse_long:
            self.check_request(docs, "docs")
        started = time.perf_counter()
        with self._locked(project_id, "index") as backend:
            pass  # opened (or reopened after a reindex) under the locks; it embeds outside them
        embedded = self._embed_ahead(project_id, backend, docs, gone)
        with self._locked(project_id, "index") as current, \
                self.writing(project_id, current, [(d, None) for d in docs]):
            if current is backend:
                current.index_embedded(docs, embedded)
            else:  # reopened meanwhile (another process rebuilt the store): embed under the lock
                current.index(docs)
        self._log("index", project_id, started, docs=len(docs))

    def _embed_ahead(self, project_id: str, backend: MemoryBackend, docs: list[str],
                     gone: Callable[[], bool] | None) -> dict[str, Any]:
        """What `backend.embed_ahead` gives for the docs, batch by batch, outside the locks."""
        embedded: dict[str, Any] = {}
        for batch in embed_batches(docs):
            if gone is not None and gone():
                raise RequestGone(f"memory index for project {project_id!r}: the client went away, "
                                  f"so the {len(docs)} docs were not indexed")
            try:
                embedded.update(backend.embed_ahead(batch))
            except Exception as exc:
                raise MemoryStoreError(
                    f"memory index failed for project {project_id!r} with backend "
                    f"{self.backend_name!r} at {self.where(project_id)}: {type(exc).__name__}: {exc}"
                ) from exc
        return embedded

    def index_records(self, project_id: str, records: list[tuple[str, float | None]]) -> None:
        """Index (text, time) pairs: with their times where the backend keeps times (a
        reindex keeps a doc's age, which recency ranks by), else as plain docs."""
        texts = [self.prepare_doc(t) for t, _ in records]
        if not texts:
            return
        started = time.perf_counter()
        with self._locked(project_id, "index") as backend:
            written = list(zip(texts, (w for _, w in records)))
            with self.writing(project_id, backend, written):
                write_records(backend, written)
        self._log("index", project_id, started, docs=len(texts))

    def index_new_records(self, project_id: str, records: list[tuple[str, float | None]]) -> int:
        """Index the (text, time) pairs whose text is not in the store yet, under one hold of the
        project's locks (an import rerun, or two at once, adds nothing twice); returns how many."""
        validate_project_id(project_id)
        # A doc that is all <private> is skipped, not a reason to stop the import.
        prepared = [(self.prepare_doc(t), w) for t, w in records if cut_private(t).strip()]
        started = time.perf_counter()
        with self._locked(project_id, "import") as backend:
            has = backend.has_doc  # declared on MemoryBackend: cheap in the built-ins, a listing by default
            seen: set[str] = set()
            fresh = []
            for text, when in prepared:
                if text not in seen and not has(text):
                    fresh.append((text, when))
                seen.add(text)
            if fresh:
                with self.writing(project_id, backend, fresh):
                    write_records(backend, fresh)
        self._log("import", project_id, started, docs=len(records), added=len(fresh))
        return len(fresh)

    def delete_forms(self, docs: list[str]) -> list[str]:
        """The texts `delete` looks for: each doc, and its cut form when it is longer than
        max_doc_chars (stores written before the cap may hold it whole)."""
        return list(dict.fromkeys(form for d in docs for form in
                                  (d, truncate_doc(d, self.max_doc_chars),
                                   truncate_doc(cut_private(d), self.max_doc_chars)) if form))

    def delete(self, project_id: str, docs: list[str]) -> int:
        """Delete docs by exact text; a doc longer than max_doc_chars also means its cut form.

        The full text is kept in the list too: stores written before the cap may hold it whole.
        """
        validate_project_id(project_id)
        given = _check_texts(docs, "docs", "text", allow_empty=True)
        docs = self.delete_forms(given)
        started = time.perf_counter()
        with self._locked(project_id, "delete") as backend, \
                self.writing(project_id, backend, [(d, None) for d in docs]):
            removed = backend.delete(docs)
        self._log("delete", project_id, started, docs=len(given), removed=removed)
        return removed

    def list_docs(self, project_id: str) -> list[str]:
        """Every doc, oldest first; [] (creating nothing) for a project without a store."""
        if not self.has_store(project_id):
            return []
        with self._locked(project_id, "list") as backend:
            try:
                return backend.list_docs()
            except NotImplementedError as exc:
                raise MemoryStoreError(f"{exc}; use `middle memory search` instead") from None

    def doc_time(self, project_id: str, doc: str) -> float | None:
        """When the doc happened, where the backend keeps times (an edit keeps it); else None."""
        return self.doc_times(project_id, [doc]).get(doc)

    def doc_times(self, project_id: str, docs: list[str]) -> dict[str, float]:
        """The times of `docs` (exact texts) the store dates them by, where the backend keeps
        times, each looked up by itself (MemoryBackend.doc_time), not by listing the store: a
        bulk change of 10 docs at 100,000 docs reads 10 rows. A backend that keeps the default
        doc_time (a listing each time) is listed once for all of them instead. A doc not there
        or without a time is left out."""
        wanted = list(dict.fromkeys(docs))
        if not wanted or not self.backend_cls.keeps_times or not self.has_store(project_id):
            return {}
        with self._locked(project_id, "lookup") as backend:
            if type(backend).doc_time is MemoryBackend.doc_time:
                asked = set(wanted)
                found = {text: when for text, when in backend.list_records() if text in asked}
            else:
                found = {d: backend.doc_time(d) for d in wanted}
        # stored state is untrusted: only a number is a time
        return {d: float(w) for d, w in found.items()
                if isinstance(w, (int, float)) and not isinstance(w, bool)}

    def has_doc(self, project_id: str, doc: str) -> bool:
        """Whether the store holds exactly this doc (as `prepare_doc` would store it)."""
        doc = self.prepare_doc(doc)
        if not self.has_store(project_id):
            return False
        with self._locked(project_id, "lookup") as backend:
            return backend_has_doc(backend, doc)

    def find_docs(self, project_id: str, id_or_text: str) -> list[str]:
        """The docs `id_or_text` names: the doc with exactly that text, else the docs whose id
        starts with it (4+ hex characters). The store is asked for that text or that id
        (MemoryBackend.has_doc, docs_by_id), not listed whole: a lookup by id stays quick at
        100,000 docs."""
        if not self.has_store(project_id):
            return []
        key = id_or_text.strip().lower()
        with self._locked(project_id, "lookup") as backend:
            if id_or_text and backend_has_doc(backend, id_or_text):
                return [id_or_text]
            if len(key) < 4 or any(c not in "0123456789abcdef" for c in key):
                return []
            try:
                return docs_by_id(backend, key)
            except NotImplementedError as exc:  # a backend that can neither look up nor list
                raise MemoryStoreError(f"{exc}; use `middle memory search` instead") from None

    def docs_present(self, project_id: str, docs: list[str]) -> set[str]:
        """Which of `docs` (exact texts) the store holds, each looked up by its full id
        (MemoryBackend.docs_by_id), not by listing the store: an undo at 100,000 docs reads
        only the docs it touched. A backend that keeps the default lookup (a listing each
        time) is listed once for all of them instead."""
        wanted = list(dict.fromkeys(docs))
        if not wanted or not self.has_store(project_id):
            return set()
        with self._locked(project_id, "lookup") as backend:
            if type(backend).docs_by_id is MemoryBackend.docs_by_id:
                try:
                    listed = set(backend.list_docs())
                except NotImplementedError:  # neither lookup nor listing: ask for each text
                    return {d for d in wanted if backend_has_doc(backend, d)}
                return {d for d in wanted if d in listed}
            return {d for d in wanted if d in docs_by_id(backend, doc_id(d))}

    # -- conversation watching (sliding_window) ---------------------------------------------
    def observe_round(self, project_id: str, conversation_id: str, prompt: str, response: str) -> None:
        # The conversation a backend keeps is memory too: <private> spans never reach it.
        with self._locked(project_id, "observe") as backend:
            backend.observe_round(conversation_id, cut_private(prompt), cut_private(response))

    def conversation_context(self, project_id: str, conversation_id: str) -> ConversationContext | None:
        with self._locked(project_id, "context") as backend:
            return backend.conversation_context(conversation_id)

    def flush(self, timeout: float | None = None) -> None:
        for backend in list(self._backends.values()):
            backend.flush(timeout)

    def close(self) -> None:
        with self._master:
            backends, self._backends = list(self._backends.values()), {}
        for backend in backends:
            try:
                backend.close()
            except Exception:  # closing must not mask the run's own outcome
                log.exception("closing memory backend %s failed", self.backend_name)
        self._locks_across.close()

    def _log(self, op: str, project_id: str, started: float, **counts: int) -> None:
        ms = (time.perf_counter() - started) * 1000
        detail = " ".join(f"{k}={v}" for k, v in counts.items())
        log.info(
            "memory %s project=%s backend=%s %s in %.1f ms (store %s)",
            op,
            project_id,
            self.backend_name,
            detail,
            ms,
            self.where(project_id),
        )
