"""Where LangGraph checkpoints live: a SQLite file beside the ticket store, or PostgreSQL.

Both are read back through the same strict reader (`graph/serde.py`): nothing a checkpoint names
is imported or called, whichever database it came from. Each driver opens its own checkpointer
and closes it with `close()`; on PostgreSQL it borrows the ticket store's connection pool (one
pool per process, `pool=`), so a worker's connections are the store's.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from orchestrator.errors import StoreError, StoreUnavailable
from orchestrator.graph.serde import StrictSerializer

BUSY_TIMEOUT_S = 60.0  # how long a SQLite checkpoint write waits for another process's write
SETUP_LOCK_KEY = 0x6D6964636B70  # "midckp": one checkpoint migration at a time per database
_PG_SETUP: set[str] = set()  # URLs whose checkpoint tables this process has created or migrated
_PG_SETUP_LOCK = threading.Lock()


@dataclass
class Checkpointer:
    saver: Any  # a LangGraph BaseCheckpointSaver
    close: Callable[[], None]
    error: Callable[[BaseException], StoreError | None]  # a database error as a clear StoreError


def open_checkpointer(target: str | Path, *, reconnect_s: float = 60.0, pool: Any = None) -> Checkpointer:
    """The checkpointer for a postgresql:// URL, else for the SQLite file at `target`.
    `reconnect_s`: how long a PostgreSQL call waits for an unreachable server ([store] reconnect_s).
    `pool`: the ticket store's pool of the same database (autocommit connections), shared and
    left open by `close()`; None: a pool of its own."""
    from tickets.db import is_postgres

    if is_postgres(target):
        return _postgres(str(target), reconnect_s, pool)
    return _sqlite(Path(target))


def _sqlite(path: Path) -> Checkpointer:
    from langgraph.checkpoint.sqlite import SqliteSaver

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Two `middle run` processes share this file: wait for the other's write (like the
        # ticket store does) instead of failing after SQLite's default 5 s.
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=BUSY_TIMEOUT_S)
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        conn.execute("PRAGMA journal_mode=WAL")
    except (OSError, sqlite3.Error) as exc:
        raise sqlite_error(path, exc) from None

    def error(exc: BaseException) -> StoreError | None:
        return sqlite_error(path, exc) if isinstance(exc, sqlite3.DatabaseError) else None

    return Checkpointer(SqliteSaver(conn, serde=StrictSerializer(str(path))), conn.close, error)


def sqlite_error(path: Path, exc: BaseException) -> StoreError:
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc)):
        return StoreError(
            f"the checkpoint file {path} stayed locked by another process for {BUSY_TIMEOUT_S:.0f}s "
            f"({exc}): wait for the other `middle` command, then continue with `middle resume`")
    return StoreError(
        f"the checkpoint file {path} is unreadable ({exc}): it is corrupt or not a checkpoint "
        "database. Move it away and start the ticket again with `middle run` (runs in it can "
        "then not be resumed)")


def _postgres(url: str, reconnect_s: float, shared: Any = None) -> Checkpointer:
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool
    except ImportError:
        raise StoreError("a postgresql:// store needs its extra: pip install 'middle-agent[postgres]'") from None
    from tickets.db import redact

    where = redact(url)
    # What PostgresSaver needs of its connections (autocommit, dict rows, no prepared statements).
    if shared is not None:  # the store's: its cursors ask for dict rows themselves
        pool, close = shared, lambda: None
    else:
        pool = ConnectionPool(url, min_size=1, max_size=4, open=False, name="middle-checkpoints",
                              check=ConnectionPool.check_connection, timeout=reconnect_s,
                              kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
        try:
            pool.open(wait=True, timeout=reconnect_s)
        except Exception as exc:
            pool.close()
            raise StoreUnavailable(f"cannot reach the PostgreSQL checkpoint store at {where} ({exc}): check "
                                   "[store] url and that the server is running") from None
        close = pool.close
    saver = PostgresSaver(pool, serde=StrictSerializer(where))  # type: ignore[arg-type]
    with _PG_SETUP_LOCK:
        if url not in _PG_SETUP:
            # LangGraph's migrations create indexes CONCURRENTLY, which wait for every other open
            # transaction: two machines migrating at once would wait for each other forever. One
            # at a time, under a session advisory lock; a migrated database is a quick no-op.
            with psycopg.connect(url, autocommit=True) as lock:
                # Try, then sleep: a session blocked in pg_advisory_lock would itself be an open
                # transaction the holder's CONCURRENTLY index waits for (a deadlock).
                while lock.execute("SELECT pg_try_advisory_lock(%s)", (SETUP_LOCK_KEY,)).fetchone() != (True,):
                    time.sleep(0.2)
                try:
                    saver.setup()
                finally:
                    lock.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK_KEY,))
            _PG_SETUP.add(url)

    def error(exc: BaseException) -> StoreError | None:
        if isinstance(exc, psycopg.OperationalError):
            return StoreUnavailable(f"cannot reach the PostgreSQL checkpoint store at {where} ({exc}): "
                                    "check [store] url and that the server is running")
        if isinstance(exc, psycopg.Error):
            return StoreError(f"the PostgreSQL checkpoint store at {where} failed: {exc}")
        return None

    return Checkpointer(saver, close, error)


def prune_checkpoints(checkpointer: Checkpointer, run_ids: list[str]) -> None:
    """Drop the checkpoints of those runs (ended ones `middle gc` prunes; a run is a thread)."""
    for run_id in run_ids:
        try:
            checkpointer.saver.delete_thread(run_id)
        except Exception as exc:
            error = checkpointer.error(exc)
            if error is None:
                raise
            raise error from None
