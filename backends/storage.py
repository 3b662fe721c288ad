"""The one storage base of the built-in backend stores: a SQLite file in WAL mode with its schema,
format version, transactions, meta values and a generation change log."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from orchestrator.plugin_api import MemoryStoreError

CHUNK = 500  # ids per IN (...) query: below SQLite's bound-parameter limit
KEEP_GENERATIONS = 1000  # change-log depth; a reader further behind reloads in full
STALE_NEW_S = 60  # a half-built new store file older than this is a killed creator's leftover
# SQLite's primary result codes for a damaged file: SQLITE_CORRUPT and SQLITE_NOTADB.
CORRUPT_CODES = {11, 26}
SALVAGE_GAP = 10_000  # with no readable upper bound, a salvage scan stops after this many missing ids
ErrorFactory = Callable[[sqlite3.Error, str], Exception]
# How many writes of the docs' table the store has seen: its greatest `n` (SQLite: one row,
# counted up; PostgreSQL: a row per write, see pg_storage.pg_counter)
WRITES_TABLE = "doc_writes"
# Meta keys of Store.watch_outside_writes: the count of the docs' writes middle's last write left,
# and how many writes the store found that none of middle's made.
OWN_WRITES = "own_doc_writes"
OUTSIDE_WRITES = "outside_doc_writes"
# The table where a store with CountedWrites.key logs the key of every doc row written (by
# triggers, for any program); middle's own writes delete their rows before they commit, so what
# is left was written by another program, and the backend catches up on it (rederive.CatchesUp).
OUTSIDE_LOG = "outside_log"


@dataclass(frozen=True)
class CountedWrites:
    """The table of a store's docs whose writes the store counts in `doc_writes` (its one row
    `n`), by triggers in the store itself: every SQL write counts, from middle, another
    process or any tool (an `UPDATE docs SET text = ...` by hand too), so a fingerprint that
    reads the count (MemoryBackend.fingerprint) sees a doc rewritten in place, which the count
    of docs and the newest id do not. Added to an existing store when it is opened (no format
    version: an older middle-agent runs the triggers without reading the count).

    `columns`: an UPDATE of these counts (the text, the time, the hash); one of other columns
    (a recall's access counts) does not, so a recall does not look like a change of the docs.
    `only`: (column, value) a row must hold to count (sliding_window keeps its docs among the
    messages of the conversations it watches)."""

    table: str
    columns: tuple[str, ...]
    only: tuple[str, str] | None = None
    #: The column naming a doc's row (its id): set, the store also logs every written row's key
    #: in OUTSIDE_LOG, so a backend that derives structures from its docs catches up on the
    #: rows another program wrote (backends.rederive.CatchesUp) instead of needing a reindex.
    key: str | None = None

    def where(self, row: str) -> str:
        """The SQL condition on a row (NEW or OLD) that counts; '' for every row."""
        if self.only is None:
            return ""
        column, value = self.only
        return f"{row}.{column} = '{value.replace(chr(39), chr(39) * 2)}'"

    def sqlite_statements(self) -> list[str]:
        """The counter and its triggers, laid on every open (IF NOT EXISTS: an existing
        store gets them in place; another connection sees the new schema at its next
        statement, as SQLite re-reads a schema that changed)."""
        bump = f"BEGIN UPDATE {WRITES_TABLE} SET n = n + 1; END"
        events = {"inserted": ("INSERT", self.where("NEW")),
                  "updated": (f"UPDATE OF {', '.join(self.columns)}",
                              self.where("NEW") and f"{self.where('NEW')} OR {self.where('OLD')}"),
                  "deleted": ("DELETE", self.where("OLD"))}
        return [f"CREATE TABLE IF NOT EXISTS {WRITES_TABLE} (n INTEGER NOT NULL)",
                f"INSERT INTO {WRITES_TABLE} SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM {WRITES_TABLE})",
                *(f"CREATE TRIGGER IF NOT EXISTS {self.table}_{name}_counted AFTER {event} ON "
                  f"{self.table} FOR EACH ROW {f'WHEN {when} ' if when else ''}{bump}"
                  for name, (event, when) in events.items()),
                *self._sqlite_log(events)]

    def _sqlite_log(self, events: dict[str, tuple[str, str]]) -> list[str]:
        """The log of written rows' keys (OUTSIDE_LOG), when `key` is set: an insert logs the new
        row, a delete the old one, a rewrite both (the same key, but a row may leave or enter
        the counted ones)."""
        if self.key is None:
            return []
        log = f"INSERT INTO {OUTSIDE_LOG} (doc) VALUES"
        rows = {"inserted": f"{log} (NEW.{self.key});", "deleted": f"{log} (OLD.{self.key});",
                "updated": f"{log} (OLD.{self.key}); {log} (NEW.{self.key});"}
        return [f"CREATE TABLE IF NOT EXISTS {OUTSIDE_LOG} (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
                "doc INTEGER NOT NULL, tx INTEGER)",
                *(f"CREATE TRIGGER IF NOT EXISTS {self.table}_{name}_logged AFTER {event} ON "
                  f"{self.table} FOR EACH ROW {f'WHEN {when} ' if when else ''}BEGIN {rows[name]} END"
                  for name, (event, when) in events.items())]


def warn_outside_writes(store: Store, backend: str, what: str, log: Any, in_place: bool = True) -> None:
    """One warning when another program wrote the store's docs, which the backend's `what`
    (derived from them by its own writes) then no longer matches, naming the way to rebuild
    (`in_place`: the backend rebuilds a store in PostgreSQL where it is, backends.rederive)."""
    store.watch_outside_writes = True
    if not (count := store.outside_writes()) or count <= store.logged_outside():
        return  # none, or each one logged: the backend catches up on it (rederive.CatchesUp)
    fix = (f"run `middle memory reindex --from {backend}` to rebuild them from the docs"
           if isinstance(store, SqliteStore) or in_place else
           "`middle memory export` its docs, delete them and add them again to rebuild them")
    log.warning("the %s store %s was written by another program (%d write(s) of its docs middle did "
                "not make): its %s may not match its docs; %s", backend, store.path, count, what, fix)


def end_interrupted(conn: sqlite3.Connection) -> None:
    """Roll back a transaction an interrupt left open. Ctrl-C raises between any two bytecodes,
    so it can land after a BEGIN and before the handler that would end it (seen in CI: an
    import stopped mid-batch, then closing the store failed with "cannot start a transaction
    within a transaction"). Such a transaction never committed; the store's one connection runs
    one transaction at a time under its lock, so an open one here is always such a leftover."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


@contextmanager
def write_tx(conn: sqlite3.Connection, error: ErrorFactory) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT (another process waits rather than races); rolled back on any
    error, COMMIT's own included, so a failed write changes nothing. The caller holds its lock."""
    try:
        end_interrupted(conn)
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise error(exc, "write failed in") from exc


@contextmanager
def read_tx(conn: sqlite3.Connection, error: ErrorFactory) -> Iterator[sqlite3.Connection]:
    """One deferred transaction: every SELECT in it sees the same committed state."""
    try:
        end_interrupted(conn)
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise error(exc, "read failed in") from exc


class MetaValues:
    """Meta values of a store (key -> text), for the SQLite stores and the PostgreSQL one alike.
    A subclass gives `read()`/`write()` transactions, `meta(conn, key)`, `claim(conn, key,
    value)` (insert unless set), and `kind`, `path` and `corrupt_hint` for messages."""

    kind: str
    path: Any
    corrupt_hint = "move the file away to start afresh"
    seen_damage = False  # a read or write found the store damaged (and said so)

    def damaged(self, why: str) -> MemoryStoreError:
        """The error for a store file that exists but cannot be read as the store it was."""
        self.seen_damage = True
        return MemoryStoreError(f"the {self.kind} {self.path} is damaged ({why}); "
                                f"{self.corrupt_hint}")

    def read(self) -> Any:
        raise NotImplementedError

    def write(self) -> Any:
        raise NotImplementedError

    def meta(self, conn: Any, key: str) -> str | None:
        raise NotImplementedError

    def claim(self, conn: Any, key: str, value: str) -> None:
        raise NotImplementedError

    def read_meta(self, key: str) -> str | None:
        """One meta value, in its own read transaction."""
        with self.read() as conn:
            return self.meta(conn, key)

    def meta_json(self, conn: Any, key: str, default: Any) -> Any:
        """A JSON meta value; a value that is not JSON is a corrupt store, said with its path."""
        raw = self.meta(conn, key)
        if raw is None:
            return default
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise MemoryStoreError(f"the {self.kind} {self.path} is corrupt (meta {key!r} is not "
                                   f"JSON: {exc}); {self.corrupt_hint}") from None

    def claim_meta(self, values: dict[str, str]) -> dict[str, str]:
        """Record values not yet set (first writer wins) and return what the store holds."""
        with self.write() as conn:
            for key, value in values.items():
                self.claim(conn, key, value)
            return {key: self.meta(conn, key) or "" for key in values}


class Connection(Protocol):
    """What the stores' SQL runs on: a sqlite3 connection, or the PostgreSQL one of
    backends.pg_storage, which takes the same SQL (`?` placeholders, ON CONFLICT upserts)."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Any, /) -> Any: ...


class Store(MetaValues):
    """What every built-in backend store does alike on SQLite (SqliteStore) and PostgreSQL
    (backends.pg_storage.PgStore): meta values, the format version, the change log and vector
    tables, in SQL both engines run. A subclass opens the store and gives `read()`/`write()`
    transactions through `_transaction`, so one begun inside another of the same store (by the
    thread holding its lock) joins it: a retrieve can read its whole answer in one snapshot."""

    format_version: int
    #: Tables of chunk vectors (table -> slots): row `doc * slots + n` is a doc's chunk n, and
    #: `vector_rows(..., ids)` takes doc ids for them (backends.retrieval.chunking).
    chunk_tables: dict[str, int] = {}
    lock: threading.RLock
    _current: tuple[str, Any] | None = None  # the transaction the lock's holder is in
    #: Whether each write records the count of the docs' writes (CountedWrites) it leaves, so
    #: that a write another program made shows as a count no write of middle's left
    #: (`outside_writes`): set by a backend whose derived structures (a graph, facts, a
    #: summary) only its own writes keep, and which does not catch up on such writes.
    watch_outside_writes = False

    @contextmanager
    def _transaction(self, kind: str, begin: Callable[[], Any]) -> Iterator[Any]:
        """`begin()`'s transaction (a context manager yielding its connection), or the one
        this thread is already in: a read joins a read or a write, a write joins a write."""
        with self.lock:
            if self._current is not None:
                held, conn = self._current
                if kind == "write" and held == "read":
                    raise RuntimeError(f"a write inside a read transaction of {self.path}")
                yield conn
                return
            with begin() as conn:
                self._current = (kind, conn)
                try:
                    watched = kind == "write" and self.watch_outside_writes
                    if watched:
                        self._note_outside_writes(conn)
                    logged = self._log_start(conn) if kind == "write" and self.logs_outside else None
                    # (None: a store laid before the log existed, opened now: this write lays it)
                    yield conn
                    if logged is not None:
                        self._log_own(conn, logged)
                    if watched:
                        self._own_writes_done(conn)
                finally:
                    self._current = None

    # --- the log of rows other programs wrote (CountedWrites.key) ----------------------------

    @property
    def logs_outside(self) -> bool:
        counted = getattr(self, "_counted", None)
        return counted is not None and counted.key is not None

    def _log_start(self, conn: Any) -> int | None:
        """At a write's start: the log's last entry. The write holds the file's write lock
        (BEGIN IMMEDIATE) from here, so every entry after it is one of this write's own. None
        when the store has no log yet (made by a version before it: the open's first write lays
        it, and its own entries are none)."""
        if not getattr(self, "_log_laid", False):
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (OUTSIDE_LOG,)).fetchone() is None:
                return None
            self._log_laid = True
        row = conn.execute(f"SELECT MAX(seq) FROM {OUTSIDE_LOG}").fetchone()
        return int(row[0]) if row is not None and row[0] is not None else 0

    def _log_own(self, conn: Any, start: int) -> None:
        """Before a write of middle's commits: its own entries out of the log (it kept the
        derived structures itself)."""
        conn.execute(f"DELETE FROM {OUTSIDE_LOG} WHERE seq > ?", (start,))

    def outside_pending(self, conn: Any) -> bool:
        """Whether the log holds rows another program wrote (one indexed read)."""
        return conn.execute(f"SELECT 1 FROM {OUTSIDE_LOG} LIMIT 1").fetchone() is not None

    def logged_outside(self) -> int:
        """How many writes of other programs the log holds (0 without a log)."""
        if not self.logs_outside:
            return 0
        with self.read() as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM {OUTSIDE_LOG}").fetchone()[0])

    def take_outside(self, conn: Any) -> list[int]:
        """Inside a write: the keys of the rows other programs wrote, oldest write first, each
        once, taken out of the log (the caller catches up on them in this transaction)."""
        rows = conn.execute(f"SELECT seq, doc FROM {OUTSIDE_LOG} WHERE {self._not_own} ORDER BY seq").fetchall()
        seqs = [int(r[0]) for r in rows]
        for start in range(0, len(seqs), CHUNK):  # exactly these: one committed meanwhile waits
            chunk = seqs[start:start + CHUNK]
            conn.execute(f"DELETE FROM {OUTSIDE_LOG} WHERE seq IN {in_clause(chunk)}", chunk)
        bad = [r[1] for r in rows if not isinstance(r[1], int)]
        if bad:  # the triggers log row ids: another value was written there by hand
            raise self.damaged(f"its table {OUTSIDE_LOG} (the docs other programs wrote, to catch "
                               f"up on) holds {bad[0]!r}, not a row id")
        return list(dict.fromkeys(int(r[1]) for r in rows))

    #: The SQL condition of log entries not made by the current transaction (SQLite: the
    #: write lock excludes every other writer, and the catch-up runs before the write's own).
    _not_own = "1 = 1"

    # --- writes that bypassed the backend (watch_outside_writes) -----------------------------

    def _note_outside_writes(self, conn: Any) -> None:
        """At a write's start: a count other than the one the last write of middle's left means
        another program wrote the docs since; that is kept (OUTSIDE_WRITES) until the store is
        rebuilt, as this write's own count would hide it."""
        recorded = self.meta(conn, OWN_WRITES)
        if recorded is None or not recorded.isdigit() or self.meta(conn, OUTSIDE_WRITES) is not None:
            return
        if (now := self.doc_writes(conn)) != int(recorded):
            self.set_meta(conn, OUTSIDE_WRITES, str(abs(now - int(recorded))))

    def _own_writes_done(self, conn: Any) -> None:
        now = str(self.doc_writes(conn))
        if self.meta(conn, OWN_WRITES) != now:
            self.set_meta(conn, OWN_WRITES, now)

    def outside_writes(self) -> int:
        """How many writes of the docs another program made (0: none seen) since middle's
        writes began recording their count: the ones the last write found, or those since it."""
        with self.read() as conn:
            kept = self.meta(conn, OUTSIDE_WRITES)
            if kept is not None and kept.isdigit():
                return int(kept)
            recorded = self.meta(conn, OWN_WRITES)
            if recorded is None or not recorded.isdigit():
                return 0
            return abs(self.doc_writes(conn) - int(recorded))

    def close(self) -> None:
        raise NotImplementedError

    # --- meta -------------------------------------------------------------------------------

    def meta(self, conn: Any, key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def claim(self, conn: Any, key: str, value: str) -> None:
        conn.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (key, value))

    def set_meta(self, conn: Any, key: str, value: Any) -> None:
        conn.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                     (key, value if isinstance(value, str) else json.dumps(value)))

    @staticmethod
    def doc_writes(conn: Any) -> int:
        """How many writes of the docs' table the store has counted (CountedWrites)."""
        row = conn.execute(f"SELECT MAX(n) FROM {WRITES_TABLE}").fetchone()
        return int(row[0]) if row is not None and row[0] is not None else 0

    @staticmethod
    def holds_rows(conn: Any, table: str) -> bool:
        """Whether a table of the store has any row."""
        return conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None

    def raise_version(self, older: Sequence[int]) -> None:
        """Record this format version over an older one whose stores this version reads as they
        are, so a middle-agent that reads only the older one refuses the store (see
        `refuse_newer`) instead of writing rows of the old kind beside the new ones."""
        with self.write() as conn:
            if self.meta(conn, "format_version") in {str(v) for v in older}:
                self.set_meta(conn, "format_version", str(self.format_version))

    def refuse_newer(self, recorded: str | None) -> None:
        if recorded is not None and not recorded.isdigit():
            raise self.damaged(f"its meta value 'format_version' is {recorded[:40]!r}, not a whole number")
        if recorded is not None and int(recorded) > self.format_version:
            raise MemoryStoreError(
                f"the {self.kind} {self.path} has format version {recorded}, newer than this "
                f"middle-agent reads ({self.format_version}): upgrade middle-agent (pip install "
                "-U middle-agent), or move the store away to start a new one")

    # --- the change log ---------------------------------------------------------------------

    def generation(self, conn: Connection) -> tuple[int, int]:
        """(current generation, oldest generation still in the change log); a value that is not
        a whole number is a damaged store, said with its path and the way back."""
        values = []
        for key in ("generation", "changes_floor"):
            raw = self.meta(conn, key)
            try:
                values.append(int(raw or 0))
            except ValueError:
                raise self.damaged(f"its meta value {key!r} is {str(raw)[:40]!r}, not a whole "
                                   "number") from None
        return values[0], values[1]

    def bump(self, conn: Connection, rows: Sequence[tuple]) -> int:
        """Inside a write: log the touched rows (each a tuple of the `changes` columns after
        `gen`) under the next generation, and return it. The log keeps KEEP_GENERATIONS."""
        gen = self.generation(conn)[0] + 1
        self.set_meta(conn, "generation", str(gen))
        unique = list(dict.fromkeys(tuple(r) for r in rows))
        if unique:
            marks = ",".join("?" * (1 + len(unique[0])))
            conn.executemany(f"INSERT INTO changes VALUES ({marks})", [(gen, *r) for r in unique])
        if gen % 100 == 0 and gen > KEEP_GENERATIONS:
            floor = gen - KEEP_GENERATIONS
            conn.execute("DELETE FROM changes WHERE gen <= ?", (floor,))
            self.set_meta(conn, "changes_floor", str(floor))
        return gen

    # --- vectors --------------------------------------------------------------------------

    def vector_rows(self, conn: Connection, table: str, ids: Sequence[int] | None = None
                    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(ids, vectors) of a table of (id, vec) rows, ordered by id; all rows when ids is
        None. Vectors of mixed or broken sizes are a corrupt store, said with its path."""
        slots = self.chunk_tables.get(table)
        if ids is None:
            rows = conn.execute(f"SELECT id, vec FROM {table} ORDER BY id").fetchall()
        elif slots is not None:  # every chunk of each doc: a range of ids
            rows = []
            for doc in ids:
                rows += conn.execute(f"SELECT id, vec FROM {table} WHERE id >= ? AND id < ?",
                                     (doc * slots, (doc + 1) * slots)).fetchall()
            rows.sort()
        else:
            rows = []
            ids = list(ids)
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start:start + CHUNK]
                rows += conn.execute(f"SELECT id, vec FROM {table} WHERE id IN "
                                     f"{in_clause(chunk)}", chunk).fetchall()
            rows.sort()
        if not rows:
            return np.zeros(0, dtype=np.int64), None
        blobs = [r[1] for r in rows]
        if len({len(b) for b in blobs}) != 1 or len(blobs[0]) % 4:
            sizes = [len(b) for b in blobs]
            usual = max(set(sizes), key=sizes.count)  # the size most rows have is the right one
            bad = [r[0] for r, n in zip(rows, sizes) if n != usual or n % 4][:3]
            raise self.damaged(f"its table {table} holds vectors of mixed or broken sizes, e.g. "
                               f"row id(s) {bad or [rows[0][0]]}")
        vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(rows), -1)
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), vectors


class SqliteStore(Store):
    """One store file, shared by the instance's threads (one connection behind an RLock) and
    by other processes (SQLite transactions). The policy every built-in store follows:

    - opening an existing file checks it whole first (SQLite's quick_check: about 0.3 s for a
      300 MB store) and refuses a damaged one naming it, so nothing is read from it as if it
      were whole and nothing is written into it (a write into a damaged file can succeed
      while other pages are lost); then it checks the recorded format version before
      touching the schema, and refuses a newer one;
    - every write is one BEGIN IMMEDIATE transaction, rolled back whole on any error;
    - what is recorded in `meta` on first use (backend, embedder, options that shape the
      store) is claimed first-writer-wins and compared by the caller (see `claim_meta`);
    - a write that changes what in-memory mirrors hold bumps a generation and logs the touched
      rows in `changes`, so every instance (here or in another process) catches up from the log;
    - with `counted`, triggers count every write of the docs' table in `doc_writes`, by any
      program (CountedWrites), which the backend's fingerprint reads.

    The schema must create `meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)` and, for stores
    that use `bump`, `changes (gen INTEGER NOT NULL, ...)` with `gen` first.
    """

    def __init__(self, path: Path, schema: str, format_version: int, *,
                 kind: str = "memory store", row_factory: Any = None, foreign_keys: bool = False,
                 counted: CountedWrites | None = None):
        self.path = Path(path)
        self.kind = kind
        self.format_version = format_version
        self.lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._schema = schema
        self._counted = counted
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._remove_stale_new_files()  # on every open: a store made long ago leaves none otherwise
            existed = self.path.exists()
            if not existed:
                self._create()
            elif self.path.stat().st_size == 0:
                raise self.emptied()
            self._conn = self._connect(self.path)
            if existed:
                self._check_whole(self._conn)
            if row_factory is not None:
                self._conn.row_factory = row_factory
            if foreign_keys:
                self._conn.execute("PRAGMA foreign_keys=ON")
            with self.write() as conn:
                if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                    self.refuse_newer(self.meta(conn, "format_version"))
                self._lay_schema(conn)
        except MemoryStoreError:
            self.close()
            raise
        except (sqlite3.Error, OSError, ValueError) as exc:
            self.close()
            raise self.error(exc, "cannot open") from exc

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None,
                               timeout=60)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _check_whole(self, conn: sqlite3.Connection) -> None:
        """Refuse a file SQLite finds damaged anywhere (its first problem, named)."""
        problem = conn.execute("PRAGMA quick_check(1)").fetchone()
        if problem is None or problem[0] != "ok":
            said = str(problem[0] if problem else "no answer").replace("*** in database main ***", "")
            raise self.damaged(f"SQLite's check: {' '.join(said.split())}")

    def _lay_schema(self, conn: sqlite3.Connection) -> None:
        for statement in self._schema.split(";"):  # executescript would COMMIT early
            if statement.strip():
                conn.execute(statement)
        for statement in self._counted.sqlite_statements() if self._counted else ():
            conn.execute(statement)  # whole: a trigger's body holds a ';'
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('format_version', ?)",
                     (str(self.format_version),))

    def _create(self) -> None:
        """Build a new store file beside its path and link it into place whole. So the store
        file is never seen empty or half made, and a store file found empty is one that was
        cut short (see `emptied`), never a store that was about to be made."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.new")
        try:
            conn = self._connect(tmp)
            try:
                with write_tx(conn, self.error):
                    self._lay_schema(conn)
            finally:
                conn.close()  # the last connection checkpoints and removes the -wal file
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
            try:
                os.link(tmp, self.path)  # never replaces: another process may have been first
            except FileExistsError:
                pass
            except OSError:  # a file system without hard links: rename, unless one came first
                if not self.path.exists():
                    os.replace(tmp, self.path)
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                leftover.unlink(missing_ok=True)

    def _remove_stale_new_files(self) -> None:
        """Remove the half-built store files (`.<name>.<pid>-<hex>.new`, and their -wal/-shm)
        a creator killed while building one left: at once when that pid is not running here
        (kill -9 left it), else once older than STALE_NEW_S (a pid reused since)."""
        cutoff = time.time() - STALE_NEW_S
        for stale in self.path.parent.glob(f".{self.path.name}.*.new*"):
            try:
                if not _pid_alive(_creator_pid(stale.name, self.path.name)) or stale.stat().st_mtime < cutoff:
                    stale.unlink()
            except OSError:
                pass

    def emptied(self) -> MemoryStoreError:
        """The error for a store file of zero bytes: a store was there and lost its content."""
        return MemoryStoreError(
            f"the {self.kind} {self.path} is empty (0 bytes): the store that was there was cut "
            "short (a full disk, a copy or sync that stopped?) and nothing was read or written. "
            "Restore the file from a backup (a .reindex-* folder beside it holds the store as it "
            "was before the last `middle memory reindex`), or move it away to start an empty "
            "memory")


    # --- transactions ---------------------------------------------------------------------

    def write(self) -> Any:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any error: a failed write changes nothing."""
        return self._transaction("write", lambda: write_tx(self.require_open(), self.error))

    def read(self) -> Any:
        """One read transaction: every SELECT in it sees the same committed state."""
        return self._transaction("read", lambda: read_tx(self.require_open(), self.error))


    @property
    def closed(self) -> bool:
        return self._conn is None

    def close(self) -> None:
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def require_open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise MemoryStoreError(f"the {self.kind} {self.path} is closed")
        return self._conn

    @property
    def corrupt_hint(self) -> str:  # type: ignore[override]
        if not _has_sqlite_header(self.path):  # nothing in it can be read: no command can help
            return (f"its header is not SQLite's, so nothing in it can be read, by `middle memory "
                    f"export` or `reindex` either: restore the file from a backup, or move it away "
                    f"(e.g. `mv {self.path} {self.path}.damaged`) to start the project's memory afresh")
        # Every built-in store file is named after its backend (bm25.sqlite3, ...).
        return (f"`middle memory reindex --from {self.path.stem}` rebuilds it from what can "
                "still be read (the damaged file is kept in a .reindex-* folder beside it); if "
                "that fails too, restore the file from a backup, or `middle memory export` what "
                "can be read and move the file away to start afresh")

    def error(self, exc: BaseException, what: str) -> MemoryStoreError:
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in CORRUPT_CODES:
            self.seen_damage = True
            return self.damaged(str(exc))
        return MemoryStoreError(
            f"{what} the {self.kind} {self.path}: {exc}. Check that the directory is writable and "
            f"the disk not full; if the file is damaged, {self.corrupt_hint}")


def _creator_pid(name: str, store_name: str) -> int | None:
    """The pid in a half-built store file's name `.<store_name>.<pid>-<hex>.new...`, or None."""
    rest = name[len(store_name) + 2:]
    pid = rest.split("-", 1)[0]
    return int(pid) if pid.isdigit() else None


def _pid_alive(pid: int | None) -> bool:
    """Whether `pid` runs on this machine (None, unknown: counted alive, so age decides)."""
    if pid is None or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def _has_sqlite_header(path: Path) -> bool:
    """Whether the file starts as a SQLite database does (or cannot be read, or is empty: then
    the usual damage hint stands)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except OSError:
        return True
    return not head or head == SQLITE_HEADER


def salvage_rows(path: Path, table: str, columns: Sequence[str], where: str = "") -> list[tuple]:
    """The rows of `table` (its `columns`, in rowid order) that can still be read from a SQLite
    file too damaged to open as a store: all at once if SQLite can, else one rowid at a time,
    skipping those on unreadable pages. Read from a copy (with its -wal), so the damaged file
    is left exactly as it is. `table`, `columns` and `where` are the caller's constants."""
    wanted = ", ".join(columns)
    with tempfile.TemporaryDirectory(prefix="middle-salvage-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        if Path(f"{path}-wal").is_file():
            shutil.copyfile(f"{path}-wal", f"{copy}-wal")
        conn = sqlite3.connect(str(copy))
        try:
            # A file cut short claims more pages than it has, which SQLite refuses as corrupt
            # before reading anything; with writable_schema it reads the pages that are there
            # (this is a private copy, and nothing is written).
            conn.execute("PRAGMA writable_schema=ON")
            clause = f" WHERE {where}" if where else ""
            # NOT INDEXED: the table's own rows, never an index, which may sit on a page that
            # was lost (a cut file reads it as empty: a WHERE answered by it finds nothing)
            try:
                return [tuple(r) for r in conn.execute(
                    f"SELECT {wanted} FROM {table} NOT INDEXED{clause} ORDER BY rowid")]
            except sqlite3.DatabaseError:
                pass
            top = _readable_top(conn, table)
            rows, rowid, missing = [], 0, 0
            while (rowid < top) if top is not None else (missing < SALVAGE_GAP):
                rowid += 1
                try:
                    row = conn.execute(f"SELECT {wanted} FROM {table} NOT INDEXED WHERE rowid = ?"
                                       + (f" AND {where}" if where else ""), (rowid,)).fetchone()
                except sqlite3.DatabaseError:
                    row = None
                missing = 0 if row is not None else missing + 1
                if row is not None:
                    rows.append(tuple(row))
            return rows
        except sqlite3.DatabaseError:  # not even the schema can be read
            return []
        finally:
            conn.close()


def _readable_top(conn: sqlite3.Connection, table: str) -> int | None:
    """The highest rowid `table` may hold, if the file still says it."""
    for sql, args in ((f"SELECT max(rowid) FROM {table}", ()),
                      ("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,))):
        try:
            row = conn.execute(sql, args).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None and isinstance(row[0], int):
            return row[0]
    return None


def in_clause(ids: Sequence[Any]) -> str:
    """'(?,?,...)' for an IN over ids (callers chunk long lists)."""
    return "(" + ",".join("?" * len(ids)) + ")"


def inserted_id(cur: sqlite3.Cursor) -> int:
    """The rowid of the row cur's INSERT just added (sqlite3 leaves it None when none ran)."""
    if cur.lastrowid is None:
        raise RuntimeError("inserted_id: the cursor ran no INSERT")
    return cur.lastrowid

def hash_range(prefix: str) -> tuple[str, str]:
    """The least and the greatest hex SHA-256 that start with `prefix` (lowercase hex): what
    an index range on a hash column reads to find a doc by the start of its id."""
    return prefix, prefix + "f" * max(0, 64 - len(prefix))
