"""A project's doc change log: which docs every write touched, in order, so a listing of 100,000
docs (the board's catalog, memory.catalog) catches up with a write by looking at those docs
only, in this process or any other, instead of listing the whole store again.

The facade is its one writer: every write to the configured backend's store (index, index of
records, an import, delete; `stores.forget` on the configured store) notes the docs it touches
here, under the project's locks, before it writes. An entry says "this doc may have changed",
not what happened: a reader asks the store whether the doc is there (under the same locks), so a
writer killed between its note and its write leaves nothing wrong behind.

A local store's log is one SQLite file per project beside the stores (`save_dir/.changes/`).
Its `epoch` (a random token written when the file is made) changes when the log starts over:
the file removed, a write too big to note doc by doc (a bulk import), the store rebuilt by
`middle memory reindex`, the log unreadable. A reader that holds another epoch, or a position
the log has since trimmed, lists the store again. A store in the shared PostgreSQL database
keeps its log in that database (PgChangeLog), where every machine's writes note themselves.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.plugins.memory_backend import MemoryBackend

log = logging.getLogger("middle.memory")

CHANGES_DIR = ".changes"  # under save_dir: a dot name is never a project's store
MAX_NOTED = 5_000  # docs one write notes one by one; a bigger write starts the log over
KEEP = 20_000  # entries kept; a reader further behind lists the store again
TRIM_EVERY = 1_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (epoch TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log (seq INTEGER PRIMARY KEY AUTOINCREMENT, doc TEXT NOT NULL, at REAL);
CREATE TABLE IF NOT EXISTS mark (value TEXT);
"""


def store_mark(backend: MemoryBackend) -> str | None:
    """An open backend's fingerprint (MemoryBackend.fingerprint: changes whenever a doc is
    added or removed, by anyone), or None when it has none or it cannot be read (a page is
    then served as the change log has it; nothing fails for it)."""
    try:
        mark = backend.fingerprint()
    except Exception as exc:
        log.warning("memory backend %s: its fingerprint is unreadable (%s)", backend.name, exc)
        return None
    return mark if isinstance(mark, str) else None


@dataclass(frozen=True, slots=True)
class Head:
    """Where a reader is: the log's epoch and the last entry it has seen."""

    epoch: str
    seq: int


@dataclass(frozen=True, slots=True)
class Entry:
    seq: int
    doc: str
    at: float | None  # the doc's time as written (None: the backend keeps none)


class ChangeLog:
    """One project's log (call its methods under the project's locks)."""

    def __init__(self, path: Path):
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.executescript(_SCHEMA)
        return conn

    def _epoch(self, conn: sqlite3.Connection) -> str:
        row = conn.execute("SELECT epoch FROM meta").fetchone()
        if row is None:
            epoch = secrets.token_hex(8)
            conn.execute("INSERT INTO meta (epoch) VALUES (?)", (epoch,))
            return epoch
        return str(row[0])

    def note(self, docs: list[tuple[str, float | None]]) -> None:
        """Note the docs a write is about to touch ((text, time) each); a write of more than
        MAX_NOTED docs starts the log over instead (readers list the store once)."""
        if not docs:
            return
        if len(docs) > MAX_NOTED:
            self.restart()
            return
        try:
            with closing(self._connect()) as conn:
                conn.execute("BEGIN IMMEDIATE")
                self._epoch(conn)
                cur = conn.executemany("INSERT INTO log (doc, at) VALUES (?, ?)", docs)
                last = conn.execute("SELECT MAX(seq) FROM log").fetchone()[0] or 0
                if last // TRIM_EVERY != (last - cur.rowcount) // TRIM_EVERY:
                    conn.execute("DELETE FROM log WHERE seq <= ?", (last - KEEP,))
                conn.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:  # a broken log must not stop a write: readers start over
            log.warning("memory change log %s unusable (%s): starting it over", self.path, exc)
            self.restart()

    def restart(self) -> None:
        """A new epoch with no entries: every reader lists the store again."""
        try:
            with closing(self._connect()) as conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM log")
                conn.execute("DELETE FROM mark")
                conn.execute("DELETE FROM meta")
                conn.execute("INSERT INTO meta (epoch) VALUES (?)", (secrets.token_hex(8),))
                conn.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            log.warning("memory change log %s cannot be rewritten (%s): removing it", self.path, exc)
            try:
                self.path.unlink(missing_ok=True)  # a new file is a new epoch too
            except OSError:  # readers fail to read it, and list the store
                pass

    def mark(self) -> str | None:
        """The store's fingerprint as the last write through the facade left it (see
        `set_mark`); None when none was set since the log started, or it cannot be read."""
        try:
            with closing(self._connect()) as conn:
                row = conn.execute("SELECT value FROM mark").fetchone()
        except (sqlite3.Error, OSError) as exc:
            log.warning("memory change log %s unreadable (%s)", self.path, exc)
            return None
        return row[0] if row is not None and isinstance(row[0], str) else None

    def set_mark(self, value: str | None) -> None:
        """Record the store's fingerprint (MemoryBackend.fingerprint) right after a write
        through the facade: a reader that finds the store's fingerprint otherwise knows that
        something else wrote the docs since, and lists the store."""
        try:
            with closing(self._connect()) as conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM mark")
                conn.execute("INSERT INTO mark (value) VALUES (?)", (value,))
                conn.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:  # a mark left stale: readers list the store once
            log.warning("memory change log %s cannot be marked (%s)", self.path, exc)

    def head(self) -> Head | None:
        """Where the log is now; None when it cannot be read (the reader lists the store)."""
        try:
            with closing(self._connect()) as conn:
                conn.execute("BEGIN IMMEDIATE")
                epoch = self._epoch(conn)
                # the last number given, kept by SQLite after its entries were trimmed or the
                # log started over: the next entry is numbered after it
                row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'log'").fetchone()
                conn.execute("COMMIT")
                return Head(epoch, int(row[0]) if row else 0)
        except (sqlite3.Error, OSError) as exc:
            log.warning("memory change log %s unreadable (%s)", self.path, exc)
            return None

    def since(self, head: Head) -> tuple[Head, list[Entry]] | None:
        """The entries after `head` and the new head; None when the reader cannot catch up
        from there (another epoch, entries trimmed, the log unreadable or altered)."""
        try:
            with closing(self._connect()) as conn:
                row = conn.execute("SELECT epoch FROM meta").fetchone()
                if row is None or str(row[0]) != head.epoch:
                    return None
                first = conn.execute("SELECT MIN(seq) FROM log").fetchone()[0]
                if first is not None and int(first) > head.seq + 1:
                    return None  # trimmed past the reader
                rows = conn.execute("SELECT seq, doc, at FROM log WHERE seq > ? ORDER BY seq",
                                    (head.seq,)).fetchall()
        except (sqlite3.Error, OSError) as exc:
            log.warning("memory change log %s unreadable (%s)", self.path, exc)
            return None
        try:
            entries = [Entry(int(s), str(d), None if a is None else float(a)) for s, d, a in rows]
        except (TypeError, ValueError):  # stored state is untrusted: list the store instead
            return None
        return Head(head.epoch, entries[-1].seq if entries else head.seq), entries


# Schema creation takes this transaction-level advisory lock: two machines starting at once
# would otherwise race on CREATE TABLE IF NOT EXISTS.
_PG_SCHEMA_KEY = 0x6D69646C6F67  # "midlog"
_PG_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS middle_memory_log (seq BIGSERIAL PRIMARY KEY, project TEXT NOT NULL,"
    " doc TEXT NOT NULL, at DOUBLE PRECISION)",
    "CREATE INDEX IF NOT EXISTS middle_memory_log_by_project ON middle_memory_log (project, seq)",
    "CREATE TABLE IF NOT EXISTS middle_memory_log_epoch (project TEXT PRIMARY KEY, epoch TEXT NOT NULL,"
    " trimmed_to BIGINT NOT NULL DEFAULT 0)",
    # the store's fingerprint after the last write through the facade (ChangeLog.set_mark)
    "ALTER TABLE middle_memory_log_epoch ADD COLUMN IF NOT EXISTS mark TEXT",
)
_pg_ready: set[int] = set()  # pools whose database has the tables (made once per process)


class PgChangeLog:
    """The change log of a project whose store is in the shared PostgreSQL database, in that
    database (every machine's writes go there). Its entries are numbered by one sequence for
    all projects; a project's writers note under the project's advisory lock, and its readers
    read under it, so a reader never sees a later number before an earlier one. `pool`: the
    facade's lock pool (autocommit connections)."""

    def __init__(self, pool: Any, project: str, where: str):
        self.pool, self.project, self.path = pool, project, where

    def _ready(self, conn: Any) -> None:
        if id(self.pool) in _pg_ready:
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_SCHEMA_KEY,))
            for statement in _PG_SCHEMA:
                conn.execute(statement)
        _pg_ready.add(id(self.pool))

    def _epoch(self, conn: Any) -> tuple[str, int]:
        conn.execute("INSERT INTO middle_memory_log_epoch (project, epoch) VALUES (%s, %s)"
                     " ON CONFLICT (project) DO NOTHING", (self.project, secrets.token_hex(8)))
        epoch, trimmed = conn.execute("SELECT epoch, trimmed_to FROM middle_memory_log_epoch"
                                      " WHERE project = %s", (self.project,)).fetchone()
        return str(epoch), int(trimmed)

    def note(self, docs: list[tuple[str, float | None]]) -> None:
        import psycopg
        from psycopg_pool import PoolTimeout

        if not docs:
            return
        if len(docs) > MAX_NOTED:
            self.restart()
            return
        try:
            with self.pool.connection() as conn:
                self._ready(conn)
                with conn.transaction():
                    self._epoch(conn)
                    with conn.cursor() as cur:
                        cur.executemany("INSERT INTO middle_memory_log (project, doc, at) VALUES (%s, %s, %s)",
                                        [(self.project, doc, at) for doc, at in docs])
                    last = conn.execute("SELECT MAX(seq) FROM middle_memory_log WHERE project = %s",
                                        (self.project,)).fetchone()[0] or 0
                    if last // TRIM_EVERY != (last - len(docs)) // TRIM_EVERY:
                        self._trim(conn)
        except (psycopg.Error, PoolTimeout) as exc:
            log.warning("memory change log of %s in %s unusable (%s): starting it over",
                        self.project, self.path, exc)
            self.restart()

    def _trim(self, conn: Any) -> None:
        row = conn.execute("SELECT seq FROM middle_memory_log WHERE project = %s ORDER BY seq DESC"
                           " OFFSET %s LIMIT 1", (self.project, KEEP)).fetchone()
        if row is not None:
            conn.execute("DELETE FROM middle_memory_log WHERE project = %s AND seq <= %s",
                         (self.project, row[0]))
            conn.execute("UPDATE middle_memory_log_epoch SET trimmed_to = %s WHERE project = %s",
                         (row[0], self.project))

    def restart(self) -> None:
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self.pool.connection() as conn:
                self._ready(conn)
                with conn.transaction():
                    conn.execute("DELETE FROM middle_memory_log WHERE project = %s", (self.project,))
                    conn.execute("INSERT INTO middle_memory_log_epoch (project, epoch) VALUES (%s, %s)"
                                 " ON CONFLICT (project) DO UPDATE SET epoch = excluded.epoch, trimmed_to = 0,"
                                 " mark = NULL",
                                 (self.project, secrets.token_hex(8)))
        except (psycopg.Error, PoolTimeout) as exc:  # readers then fail to read it, and list the store
            log.warning("memory change log of %s in %s cannot be rewritten (%s)", self.project, self.path, exc)

    def mark(self) -> str | None:
        """See ChangeLog.mark."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self.pool.connection() as conn:
                self._ready(conn)
                row = conn.execute("SELECT mark FROM middle_memory_log_epoch WHERE project = %s",
                                   (self.project,)).fetchone()
        except (psycopg.Error, PoolTimeout) as exc:
            log.warning("memory change log of %s in %s unreadable (%s)", self.project, self.path, exc)
            return None
        return row[0] if row is not None and isinstance(row[0], str) else None

    def set_mark(self, value: str | None) -> None:
        """See ChangeLog.set_mark."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self.pool.connection() as conn:
                self._ready(conn)
                with conn.transaction():
                    self._epoch(conn)
                    conn.execute("UPDATE middle_memory_log_epoch SET mark = %s WHERE project = %s",
                                 (value, self.project))
        except (psycopg.Error, PoolTimeout) as exc:  # a mark left stale: readers list the store once
            log.warning("memory change log of %s in %s cannot be marked (%s)", self.project, self.path, exc)

    def head(self) -> Head | None:
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self.pool.connection() as conn:
                self._ready(conn)
                with conn.transaction():
                    epoch, trimmed = self._epoch(conn)
                    last = conn.execute("SELECT MAX(seq) FROM middle_memory_log WHERE project = %s",
                                        (self.project,)).fetchone()[0]
                return Head(epoch, int(last or trimmed))
        except (psycopg.Error, PoolTimeout) as exc:
            log.warning("memory change log of %s in %s unreadable (%s)", self.project, self.path, exc)
            return None

    def since(self, head: Head) -> tuple[Head, list[Entry]] | None:
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self.pool.connection() as conn:
                self._ready(conn)
                row = conn.execute("SELECT epoch, trimmed_to FROM middle_memory_log_epoch WHERE project = %s",
                                   (self.project,)).fetchone()
                if row is None or str(row[0]) != head.epoch or int(row[1]) > head.seq:
                    return None
                rows = conn.execute("SELECT seq, doc, at FROM middle_memory_log WHERE project = %s"
                                    " AND seq > %s ORDER BY seq", (self.project, head.seq)).fetchall()
        except (psycopg.Error, PoolTimeout) as exc:
            log.warning("memory change log of %s in %s unreadable (%s)", self.project, self.path, exc)
            return None
        entries = [Entry(int(s), str(d), None if a is None else float(a)) for s, d, a in rows]
        return Head(head.epoch, entries[-1].seq if entries else head.seq), entries
