"""The memory facade's cross-process lock per project: a file lock on one machine, a PostgreSQL
advisory lock across machines."""

from __future__ import annotations

import hashlib
import logging
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from filelock import FileLock, Timeout

from orchestrator.errors import MemoryStoreError
from orchestrator.plugins.memory_backend import MemoryDatabase

log = logging.getLogger("middle.memory")

POOL_MAX = 16  # projects locked at once by one process (each held lock keeps a connection)
IDLE_S = 5.0  # seconds an unused lock connection stays open (the pool keeps none)


class FileLocks:
    """`<save_dir>/.locks/<project>.lock`: processes on one machine take turns."""

    def __init__(self, lock_dir: Path, timeout_s: float):
        self.lock_dir, self.timeout_s = lock_dir, timeout_s

    def path(self, project_id: str) -> Path:
        return self.lock_dir / f"{project_id}.lock"

    @contextmanager
    def hold(self, project_id: str, op: str) -> Iterator[None]:
        lock_path = self.path(project_id)
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            flock = FileLock(str(lock_path), timeout=self.timeout_s)
            flock.acquire()
        except Timeout:
            raise MemoryStoreError(
                f"memory {op} for project {project_id!r}: another process holds the lock "
                f"{lock_path} for over {self.timeout_s:.0f}s; wait or remove a stale lock") from None
        except OSError as exc:
            raise MemoryStoreError(
                f"memory {op} for project {project_id!r}: cannot lock {lock_path} ({exc}); "
                "check the directory's permissions or [memory] save_dir") from exc
        try:
            yield
        finally:
            flock.release()

    def close(self) -> None:
        pass


def advisory_key(project_id: str) -> int:
    """The project's advisory lock key: a signed 64-bit hash of its id (a collision only makes
    two projects take turns)."""
    digest = hashlib.sha256(f"middle-memory:{project_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class AdvisoryLocks:
    """`pg_advisory_lock` on the project's key, held on a pooled connection for the call:
    processes on any machine using the same database take turns. A lock dies with its
    connection, so a killed process never leaves a stale one."""

    def __init__(self, url: str, timeout_s: float):
        try:
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise MemoryStoreError("memory in PostgreSQL needs psycopg: "
                                   "pip install 'middle-agent[postgres]'") from None
        self.url, self.where = url, MemoryDatabase(url, "").shown_url
        self.timeout_s = timeout_s
        self._pool_class = ConnectionPool
        self._pool: Any = None  # opened on first use, again after close()
        self._pool_lock = threading.Lock()

    @property
    def pool(self) -> Any:
        with self._pool_lock:
            if self._pool is None:
                # min_size 0 and a short max_idle: a worker between memory calls holds only its
                # store's connections (a lock is held for one call, then given back).
                self._pool = self._pool_class(
                    self.url, min_size=0, max_size=POOL_MAX, max_idle=IDLE_S, open=True,
                    kwargs={"autocommit": True}, check=self._pool_class.check_connection,
                    name="middle-memory-locks")
            return self._pool

    @contextmanager
    def hold(self, project_id: str, op: str) -> Iterator[None]:
        import psycopg

        key = advisory_key(project_id)
        conn = self._take(project_id, op)
        try:
            conn.execute("SELECT set_config('lock_timeout', %s, false)",
                         (f"{int(self.timeout_s * 1000)}ms",))
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        except psycopg.errors.LockNotAvailable:
            self.pool.putconn(conn)
            raise MemoryStoreError(
                f"memory {op} for project {project_id!r}: another process or machine has held "
                f"its advisory lock in {self.where} for over {self.timeout_s:.0f}s; wait, or end "
                "that process (its lock goes with its connection)") from None
        except psycopg.Error as exc:
            self.pool.putconn(conn)
            raise self._unreachable(project_id, op, exc) from None
        try:
            yield
        finally:
            try:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except psycopg.Error as exc:  # the connection broke: the lock went with it
                log.warning("releasing the memory lock of %s in %s: %s", project_id, self.where, exc)
                conn.close()
            self.pool.putconn(conn)

    def _take(self, project_id: str, op: str) -> Any:
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            return self.pool.getconn(timeout=self.timeout_s)
        except (PoolTimeout, psycopg.Error) as exc:
            raise self._unreachable(project_id, op, exc) from None

    def _unreachable(self, project_id: str, op: str, exc: BaseException) -> MemoryStoreError:
        return MemoryStoreError(
            f"memory {op} for project {project_id!r}: cannot take its lock in {self.where} "
            f"({str(exc).strip()}); check [memory] url and that the server is running")

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
