"""The memory facade: one store per project, per-project locks, logged calls, seed 000's shapes."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from filelock import FileLock, Timeout

from orchestrator.errors import ConfigError, MemoryStoreError
from orchestrator.plugin_api import ConversationContext, MemoryBackend, RetrieveResult, TextLLM
from orchestrator.plugins import PluginRegistry
from tickets.model import validate_project_id

log = logging.getLogger("middle.memory")

MEMORIES_HEADER = "Memories invoked:"


def format_memories(results: list[RetrieveResult]) -> str:
    """Seed 000: flatten every result's docs into one list; header + one doc per line, or ''."""
    docs = [doc for result in results for doc in result.get("docs", [])]
    return MEMORIES_HEADER + "\n" + "\n".join(docs) if docs else ""


class MemoryFacade:
    """Opens one backend instance per project at `<save_dir>/<project_id>/` and serialises its calls.

    A thread lock guards a project within this process; a file lock beside the store guards it
    across processes on one machine. Every error comes out as MemoryStoreError naming the
    absolute store path, so callers can log it and go on (memory failures never stop a ticket).
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
    ):
        if backend == "none":
            raise ConfigError("backend 'none' means memory off: do not build a MemoryFacade for it")
        self.save_dir = Path(save_dir).expanduser().resolve()
        self.backend_name = backend
        self.backend_cls = registry.backend_class(backend)
        self.options = registry.backend_options(backend, options or {})  # ConfigError up front
        self.llm = llm
        self.num_to_retrieve = num_to_retrieve
        self.lock_timeout_s = lock_timeout_s
        self._backends: dict[str, MemoryBackend] = {}
        self._locks: dict[str, threading.RLock] = {}
        self._master = threading.Lock()

    # -- paths and locks -------------------------------------------------------------------
    def store_dir(self, project_id: str) -> Path:
        return self.save_dir / validate_project_id(project_id)

    def _thread_lock(self, project_id: str) -> threading.RLock:
        with self._master:
            return self._locks.setdefault(project_id, threading.RLock())

    @contextmanager
    def _locked(self, project_id: str, op: str) -> Iterator[MemoryBackend]:
        store = self.store_dir(project_id)  # ConfigError for an unsafe id, before any I/O
        with self._thread_lock(project_id):
            try:
                store.mkdir(parents=True, exist_ok=True)
                flock = FileLock(str(store) + ".lock", timeout=self.lock_timeout_s)
                flock.acquire()
            except Timeout:
                raise MemoryStoreError(
                    f"memory {op} for project {project_id!r}: another process holds the lock "
                    f"{store}.lock for over {self.lock_timeout_s:.0f}s; wait or remove a stale lock"
                ) from None
            except OSError as exc:
                raise MemoryStoreError(
                    f"memory {op} for project {project_id!r}: cannot use store {store} ({exc}); "
                    "check the directory's permissions or [memory] save_dir"
                ) from exc
            try:
                yield self._backend(project_id, store)
            except (MemoryStoreError, ConfigError):
                raise
            except Exception as exc:
                raise MemoryStoreError(
                    f"memory {op} failed for project {project_id!r} with backend "
                    f"{self.backend_name!r} at {store}: {type(exc).__name__}: {exc}"
                ) from exc
            finally:
                flock.release()

    def _backend(self, project_id: str, store: Path) -> MemoryBackend:
        backend = self._backends.get(project_id)
        if backend is None:
            backend = self.backend_cls(store, self.options, self.llm)
            self._backends[project_id] = backend
        return backend

    # -- seed 000 API -------------------------------------------------------------------------
    def retrieve(
        self, project_id: str, queries: list[str], num_to_retrieve: int | None = None
    ) -> list[RetrieveResult]:
        k = num_to_retrieve or self.num_to_retrieve
        started = time.perf_counter()
        with self._locked(project_id, "retrieve") as backend:
            results = backend.retrieve(list(queries), k)
        self._log("retrieve", project_id, started, queries=len(queries),
                  docs=sum(len(r.get("docs", [])) for r in results))
        return results

    def index(self, project_id: str, docs: list[str]) -> None:
        started = time.perf_counter()
        with self._locked(project_id, "index") as backend:
            backend.index(list(docs))
        self._log("index", project_id, started, docs=len(docs))

    def delete(self, project_id: str, docs: list[str]) -> int:
        started = time.perf_counter()
        with self._locked(project_id, "delete") as backend:
            removed = backend.delete(list(docs))
        self._log("delete", project_id, started, docs=len(docs), removed=removed)
        return removed

    def list_docs(self, project_id: str) -> list[str]:
        with self._locked(project_id, "list") as backend:
            try:
                return backend.list_docs()
            except NotImplementedError as exc:
                raise MemoryStoreError(f"{exc}; use `middle memory search` instead") from None

    # -- conversation watching (sliding_window) ---------------------------------------------
    def observe_round(self, project_id: str, conversation_id: str, prompt: str, response: str) -> None:
        with self._locked(project_id, "observe") as backend:
            backend.observe_round(conversation_id, prompt, response)

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

    def _log(self, op: str, project_id: str, started: float, **counts: int) -> None:
        ms = (time.perf_counter() - started) * 1000
        detail = " ".join(f"{k}={v}" for k, v in counts.items())
        log.info("memory %s project=%s backend=%s %s in %.1f ms (store %s)",
                 op, project_id, self.backend_name, detail, ms, self.store_dir(project_id))
