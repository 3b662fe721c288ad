"""One retrieval store: SQLite (docs, vectors, FTS5, change log) plus an in-memory FAISS mirror."""

from __future__ import annotations

import hashlib
import logging
import re
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from orchestrator.plugin_api import MemoryStoreError
from backends.sqlite_tx import read_tx, write_tx

from . import bm25
from .vector import VectorIndex

log = logging.getLogger("middle.retrieval.store")

FORMAT_VERSION = 1
KEEP_GENERATIONS = 1000  # change-log depth; a reader further behind reloads in full
SNAPSHOT_MIN_DOCS = 2000  # below this, reloading vectors from SQLite is as fast as a snapshot
STALE_TMP_S = 60  # a temp file older than this is a crashed writer's leftover
_CHUNK = 500

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    hash TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    doc_time REAL NOT NULL,
    importance INTEGER NOT NULL DEFAULT 3,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_accessed REAL
);
CREATE INDEX IF NOT EXISTS docs_by_time ON docs (doc_time);
CREATE TABLE IF NOT EXISTS vectors (id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS changes (gen INTEGER NOT NULL, id INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS changes_by_gen ON changes (gen);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
    text, content='docs', content_rowid='id', tokenize='{bm25.FTS_TOKENIZE}');
"""


@dataclass(frozen=True)
class MemoryRecord:
    """A doc with optional metadata: event time (unix seconds) and importance 1-5 (seed 002)."""

    text: str
    timestamp: float | None = None
    importance: int | None = None


@dataclass
class DocRow:
    id: int
    text: str
    doc_time: float
    importance: int


def doc_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class RetrievalStore:
    """Thread-safe (one RLock); process-safe through SQLite transactions and the change log.

    SQLite is the source of truth; every write is one transaction that also bumps a generation
    counter and logs the ids it touched. The FAISS index in memory is only a mirror: before each
    call it catches up on the changes logged since its generation, so another process (or
    another instance) writing the same store is seen at once, and a crash leaves the last
    committed state.
    """

    def __init__(self, path: Path, *, use_vectors: bool):
        self.path = Path(path)
        self.use_vectors = use_vectors
        self._lock = threading.RLock()
        self._index: VectorIndex | None = None
        self._gen: int | None = None  # generation the FAISS mirror reflects; None = not loaded
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn: sqlite3.Connection | None = sqlite3.connect(
                str(self.path), check_same_thread=False, isolation_level=None, timeout=60)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            with self.write() as conn:
                for statement in SCHEMA.split(";")[:-1]:  # executescript would COMMIT early
                    conn.execute(statement)
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('format_version', ?)",
                             (str(FORMAT_VERSION),))
                version = int(self._meta(conn, "format_version") or 0)
                # A new store indexes code terms with each doc; one written before keeps its
                # FTS rows as they are (a doc's row must be deleted with the text it was added).
                empty = conn.execute("SELECT 1 FROM docs LIMIT 1").fetchone() is None
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('fts_terms', ?)",
                             (bm25.CODE_TERMS if empty else "plain",))
                self.code_terms = self._meta(conn, "fts_terms") == bm25.CODE_TERMS
        except (sqlite3.Error, OSError, ValueError) as exc:
            raise self._error(exc, "cannot open") from exc
        if version > FORMAT_VERSION:
            self.close()
            raise MemoryStoreError(
                f"the memory store {self.path} has format version {version}, newer than this "
                f"middle-agent reads ({FORMAT_VERSION}): upgrade middle-agent "
                "(pip install -U middle-agent), or move the store away to start a new one")
        self._clean_temp_files()

    @property
    def lock(self) -> threading.RLock:
        """Held for a whole backend call, so a read-embed-write sequence is one unit."""
        return self._lock

    # --- transactions ------------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any error: a failed write changes nothing."""
        with self._lock, write_tx(self._require_open(), self._error) as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every SELECT in it sees the same committed state."""
        with self._lock, read_tx(self._require_open(), self._error) as conn:
            yield conn

    def bump(self, conn: sqlite3.Connection, ids: Sequence[int]) -> int:
        """Inside a write: log the touched ids under the next generation and return it."""
        gen = int(self._meta(conn, "generation") or 0) + 1
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (str(gen),))
        conn.executemany("INSERT INTO changes (gen, id) VALUES (?, ?)", [(gen, i) for i in ids])
        if gen % 100 == 0 and gen > KEEP_GENERATIONS:
            floor = gen - KEEP_GENERATIONS
            conn.execute("DELETE FROM changes WHERE gen <= ?", (floor,))
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('changes_floor', ?)", (str(floor),))
        return gen

    # --- metadata ----------------------------------------------------------------------

    @staticmethod
    def _meta(conn: sqlite3.Connection, key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def meta(self, key: str) -> str | None:
        with self.read() as conn:
            return self._meta(conn, key)

    def claim_meta(self, values: dict[str, str]) -> dict[str, str]:
        """Record values not yet set (first writer wins) and return what the store holds."""
        with self.write() as conn:
            for key, value in values.items():
                conn.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (key, value))
            return {key: self._meta(conn, key) or "" for key in values}

    # --- the FAISS mirror --------------------------------------------------------------

    def sync(self) -> VectorIndex | None:
        """Bring the in-memory index up to the database's generation; return it."""
        if not self.use_vectors:
            return None
        with self.read() as conn:
            gen = int(self._meta(conn, "generation") or 0)
            floor = int(self._meta(conn, "changes_floor") or 0)
            if self._gen == gen:
                return self._index
            if self._gen is None or self._gen < floor or self._gen > gen:
                self._full_load(conn, gen, floor)
            else:
                self._apply_changes(conn, self._gen, gen)
            self._gen = gen
        return self._index

    def _apply_changes(self, conn: sqlite3.Connection, since: int, upto: int) -> None:
        # Remove every touched id, then re-add those that still have a vector: idempotent, so
        # the order of adds, updates and deletes within the range does not matter.
        ids = [r[0] for r in conn.execute(
            "SELECT DISTINCT id FROM changes WHERE gen > ? AND gen <= ?", (since, upto))]
        if self._index is not None:
            self._index.remove(ids)
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start:start + _CHUNK]
            rows = conn.execute(f"SELECT id, vec FROM vectors WHERE id IN "
                                f"({','.join('?' * len(chunk))})", chunk).fetchall()
            self._add_rows(rows)

    def _full_load(self, conn: sqlite3.Connection, gen: int, floor: int) -> None:
        self._index = None
        snapshot = self._best_snapshot(floor, gen)
        if snapshot is not None:
            path, snap_gen = snapshot
            try:
                self._index = VectorIndex.load(path)
                self._apply_changes(conn, snap_gen, gen)
                return
            except (MemoryStoreError, OSError) as exc:
                log.warning("Ignoring vector snapshot %s (%s); reloading from %s", path, exc, self.path)
                self._index = None
        rows = conn.execute("SELECT id, vec FROM vectors ORDER BY id").fetchall()
        self._add_rows(rows)

    def _add_rows(self, rows: list[tuple[int, bytes]]) -> None:
        if not rows:
            return
        vectors = np.vstack([np.frombuffer(blob, dtype=np.float32) for _, blob in rows])
        if self._index is None or (len(self._index) == 0
                                   and self._index.dimension != vectors.shape[1]):
            self._index = VectorIndex(vectors.shape[1])
        self._index.add(np.asarray([r[0] for r in rows], dtype=np.int64), vectors)

    # --- snapshots (a faster open for big stores) ---------------------------------------

    def _snapshots(self) -> list[tuple[Path, int]]:
        pattern = re.compile(re.escape(self.path.stem) + r"\.g(\d+)\.faiss$")
        found = []
        for p in self.path.parent.glob(f"{self.path.stem}.g*.faiss"):
            match = pattern.match(p.name)
            if match:
                found.append((p, int(match.group(1))))
        return sorted(found, key=lambda item: item[1])

    def _best_snapshot(self, floor: int, gen: int) -> tuple[Path, int] | None:
        usable = [(p, g) for p, g in self._snapshots() if floor <= g <= gen]
        return usable[-1] if usable else None

    def save_snapshot(self) -> Path | None:
        """Save the mirror as `<stem>.g<generation>.faiss` (atomically) and drop older ones."""
        with self._lock:
            index = self.sync()
            if index is None or len(index) < SNAPSHOT_MIN_DOCS or self._gen is None:
                return None
            target = self.path.with_name(f"{self.path.stem}.g{self._gen}.faiss")
            if not target.exists():
                index.save(target)
            for path, gen in self._snapshots():
                if gen < self._gen:
                    path.unlink(missing_ok=True)
            return target

    def _clean_temp_files(self) -> None:
        cutoff = time.time() - STALE_TMP_S
        for tmp in self.path.parent.glob(f"{self.path.stem}.g*.faiss.*.tmp"):
            try:
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
                    log.info("Removed leftover temp file %s", tmp)
            except OSError:
                pass

    # --- row writes (call inside write(), then bump() with the touched ids) ----------------

    def insert(self, conn: sqlite3.Connection, record: MemoryRecord, vector: np.ndarray | None,
               now: float) -> int | None:
        """Add a doc; None when the exact text is already stored (another writer was first)."""
        cur = conn.execute(
            "INSERT OR IGNORE INTO docs (hash, text, created_at, doc_time, importance) "
            "VALUES (?, ?, ?, ?, ?)",
            (doc_hash(record.text), record.text, now,
             record.timestamp if record.timestamp is not None else now, record.importance or 3))
        if cur.rowcount == 0:
            return None
        rowid = int(cur.lastrowid)
        conn.execute("INSERT INTO fts (rowid, text) VALUES (?, ?)", (rowid, self._fts(record.text)))
        if vector is not None:
            conn.execute("INSERT INTO vectors (id, vec) VALUES (?, ?)",
                         (rowid, np.asarray(vector, dtype=np.float32).tobytes()))
        return rowid

    def replace(self, conn: sqlite3.Connection, doc_id: int, record: MemoryRecord,
                vector: np.ndarray | None, now: float) -> bool:
        """Update a doc in place with a newer near-duplicate (seed 002): its text, vector and
        time become the new one's and its importance goes up by one (at most 5)."""
        row = conn.execute("SELECT text, importance FROM docs WHERE id = ?", (doc_id,)).fetchone()
        if row is None:
            return False
        old_text, importance = row
        conn.execute("INSERT INTO fts (fts, rowid, text) VALUES ('delete', ?, ?)",
                     (doc_id, self._fts(old_text)))
        conn.execute(
            "UPDATE docs SET hash = ?, text = ?, doc_time = ?, importance = ? WHERE id = ?",
            (doc_hash(record.text), record.text,
             record.timestamp if record.timestamp is not None else now,
             min(5, max(importance, record.importance or 3) + 1), doc_id))
        conn.execute("INSERT INTO fts (rowid, text) VALUES (?, ?)", (doc_id, self._fts(record.text)))
        if vector is not None:
            conn.execute("INSERT OR REPLACE INTO vectors (id, vec) VALUES (?, ?)",
                         (doc_id, np.asarray(vector, dtype=np.float32).tobytes()))
        return True

    def _fts(self, text: str) -> str:
        return bm25.fts_text(text) if self.code_terms else text

    def remove(self, conn: sqlite3.Connection, doc_id: int) -> None:
        row = conn.execute("SELECT text FROM docs WHERE id = ?", (doc_id,)).fetchone()
        if row is None:
            return
        conn.execute("INSERT INTO fts (fts, rowid, text) VALUES ('delete', ?, ?)",
                     (doc_id, self._fts(row[0])))
        conn.execute("DELETE FROM docs WHERE id = ?", (doc_id,))
        conn.execute("DELETE FROM vectors WHERE id = ?", (doc_id,))

    # --- queries -----------------------------------------------------------------------

    def rows(self, ids: Sequence[int]) -> dict[int, DocRow]:
        found: dict[int, DocRow] = {}
        with self.read() as conn:
            for start in range(0, len(ids), _CHUNK):
                chunk = list(ids[start:start + _CHUNK])
                for r in conn.execute(
                    "SELECT id, text, doc_time, importance FROM docs WHERE id IN "
                    f"({','.join('?' * len(chunk))})", chunk):
                    found[r[0]] = DocRow(r[0], r[1], r[2], r[3])
        return found

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        found: dict[int, np.ndarray] = {}
        with self.read() as conn:
            for start in range(0, len(ids), _CHUNK):
                chunk = list(ids[start:start + _CHUNK])
                for i, blob in conn.execute(
                    f"SELECT id, vec FROM vectors WHERE id IN ({','.join('?' * len(chunk))})",
                    chunk):
                    found[i] = np.frombuffer(blob, dtype=np.float32)
        return found

    def ids_by_text(self, conn: sqlite3.Connection, texts: Sequence[str]) -> dict[str, int]:
        found = {}
        for text in texts:
            row = conn.execute("SELECT id FROM docs WHERE hash = ?", (doc_hash(text),)).fetchone()
            if row is not None:
                found[text] = int(row[0])
        return found

    def bm25(self, query: str, k: int) -> list[tuple[int, float]]:
        with self.read() as conn:
            return bm25.search(conn, "fts", query, k, self.code_terms)

    def recent(self, n: int) -> list[int]:
        """Ids of the n newest docs by event time, newest first."""
        with self.read() as conn:
            return [r[0] for r in conn.execute(
                "SELECT id FROM docs ORDER BY doc_time DESC, id DESC LIMIT ?", (n,))]

    def texts(self) -> list[str]:
        with self.read() as conn:
            return [r[0] for r in conn.execute("SELECT text FROM docs ORDER BY id")]

    def count(self) -> int:
        with self.read() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM docs").fetchone()[0])

    def touch(self, ids: Sequence[int], now: float) -> None:
        """Access count and last-accessed time (seed 002); not a content change, no generation."""
        if not ids:
            return
        with self.write() as conn:
            conn.executemany("UPDATE docs SET access_count = access_count + 1, last_accessed = ? "
                             "WHERE id = ?", [(now, i) for i in ids])

    def stats(self) -> list[dict[str, Any]]:
        """Every doc's metadata, oldest first (for inspection and tests)."""
        with self.read() as conn:
            rows = conn.execute("SELECT id, text, created_at, doc_time, importance, access_count, "
                                "last_accessed FROM docs ORDER BY id").fetchall()
        keys = ("id", "text", "created_at", "doc_time", "importance", "access_count",
                "last_accessed")
        return [dict(zip(keys, r)) for r in rows]

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._conn is None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._index, self._gen = None, None

    def _require_open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise MemoryStoreError(f"the memory store {self.path} is closed")
        return self._conn

    def _error(self, exc: BaseException, what: str) -> MemoryStoreError:
        return MemoryStoreError(
            f"{what} the memory store {self.path}: {exc}. Check that the directory is writable "
            "and the disk not full; if the file is corrupt, move it away to start afresh")
