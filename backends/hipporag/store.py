"""The graph store: one SQLite file (passages, entities, facts, edges with their contributors, vectors)."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from orchestrator.plugin_api import MemoryStoreError
from backends.sqlite_tx import read_tx, write_tx

FORMAT_VERSION = 1
KEEP_GENERATIONS = 1000  # change-log depth; a reader further behind reloads in full
CHUNK = 500  # ids per IN (...) query: below SQLite's bound-parameter limit

# Every edge can be traced to the passages that contributed it: passage-entity edges are rows
# of passage_entities; a subject-object edge's weight is the sum of passage_facts.count over
# the passages holding a fact between the two (kept summed in fact_edges); synonymy edges exist
# while both entities do. `changes` logs touched vector rows per generation so another
# instance catches up without reloading everything.
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS passages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, hash TEXT NOT NULL UNIQUE, text TEXT NOT NULL,
    created_at REAL NOT NULL, source TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS passages_by_time ON passages (created_at);
CREATE TABLE IF NOT EXISTS entities (
    id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS facts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, subject INTEGER NOT NULL, predicate TEXT NOT NULL,
    object INTEGER NOT NULL, UNIQUE (subject, predicate, object));
CREATE TABLE IF NOT EXISTS passage_entities (
    passage INTEGER NOT NULL, entity INTEGER NOT NULL, PRIMARY KEY (passage, entity))
    WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS passage_entities_by_entity ON passage_entities (entity);
CREATE TABLE IF NOT EXISTS passage_facts (
    passage INTEGER NOT NULL, fact INTEGER NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (passage, fact)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS passage_facts_by_fact ON passage_facts (fact);
CREATE TABLE IF NOT EXISTS fact_edges (
    a INTEGER NOT NULL, b INTEGER NOT NULL, weight INTEGER NOT NULL, PRIMARY KEY (a, b))
    WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS fact_edges_by_b ON fact_edges (b);
CREATE TABLE IF NOT EXISTS synonyms (
    entity INTEGER NOT NULL, neighbour INTEGER NOT NULL, score REAL NOT NULL,
    PRIMARY KEY (entity, neighbour)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS synonyms_by_neighbour ON synonyms (neighbour);
CREATE TABLE IF NOT EXISTS passage_vectors (id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS entity_vectors (id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS fact_vectors (id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS changes (gen INTEGER NOT NULL, kind TEXT NOT NULL, id INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS changes_by_gen ON changes (gen);
"""

VECTOR_TABLES = {"p": "passage_vectors", "e": "entity_vectors", "f": "fact_vectors"}


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


class GraphStore:
    """SQLite in WAL mode; every write is one transaction that bumps a generation counter."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), check_same_thread=False,
                                         isolation_level=None, timeout=60)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            with self.write() as conn:
                for statement in SCHEMA.split(";")[:-1]:  # executescript would COMMIT early
                    conn.execute(statement)
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('format_version', ?)",
                             (str(FORMAT_VERSION),))
                version = int(self.get_meta(conn, "format_version") or 0)
        except (sqlite3.Error, OSError, ValueError) as exc:
            self.close()
            raise self.error(exc, "cannot open") from exc
        if version > FORMAT_VERSION:
            self.close()
            raise MemoryStoreError(
                f"the hipporag memory store {self.path} has format version {version}, newer than "
                f"this middle-agent reads ({FORMAT_VERSION}): upgrade middle-agent "
                "(pip install -U middle-agent), or move the store away to start a new one")

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any error: a failed write changes nothing."""
        with self._lock, write_tx(self._require_open(), self.error) as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every SELECT in it sees the same committed state."""
        with self._lock, read_tx(self._require_open(), self.error) as conn:
            yield conn

    @staticmethod
    def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def claim_meta(self, values: dict[str, str]) -> dict[str, str]:
        """Record values not yet set (first writer wins) and return what the store holds."""
        with self.write() as conn:
            for key, value in values.items():
                conn.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (key, value))
            return {key: self.get_meta(conn, key) or "" for key in values}

    @staticmethod
    def generation(conn: sqlite3.Connection) -> tuple[int, int]:
        """(current generation, oldest generation still in the change log)."""
        gen = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        floor = conn.execute("SELECT value FROM meta WHERE key = 'changes_floor'").fetchone()
        return int(gen[0]) if gen else 0, int(floor[0]) if floor else 0

    def bump(self, conn: sqlite3.Connection, changes: Sequence[tuple[str, int]]) -> int:
        """Inside a write: log what it touched under the next generation: (kind, id) with kind
        'p' passage, 'e' entity vector, 'f' fact, 'n' entity node, 'g' an entity's edges to
        other entities."""
        gen = self.generation(conn)[0] + 1
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (str(gen),))
        conn.executemany("INSERT INTO changes (gen, kind, id) VALUES (?, ?, ?)",
                         [(gen, kind, i) for kind, i in dict.fromkeys(changes)])
        if gen % 100 == 0 and gen > KEEP_GENERATIONS:
            floor = gen - KEEP_GENERATIONS
            conn.execute("DELETE FROM changes WHERE gen <= ?", (floor,))
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('changes_floor', ?)", (str(floor),))
        return gen

    def vector_rows(self, conn: sqlite3.Connection, kind: str,
                    ids: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """(ids, vectors) of one kind, ordered by id; all rows when ids is None."""
        table = VECTOR_TABLES[kind]
        if ids is None:
            rows = conn.execute(f"SELECT id, vec FROM {table} ORDER BY id").fetchall()
        else:
            rows = []
            ids = list(ids)
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start:start + CHUNK]
                rows += conn.execute(f"SELECT id, vec FROM {table} WHERE id IN "
                                     f"({','.join('?' * len(chunk))})", chunk).fetchall()
            rows.sort()
        if not rows:
            return np.zeros(0, dtype=np.int64), None
        blobs = [r[1] for r in rows]
        if len({len(b) for b in blobs}) != 1 or len(blobs[0]) % 4:
            raise MemoryStoreError(f"the memory store {self.path} holds vectors of mixed or broken "
                                   f"sizes in {table}: the file is corrupt; move it away and "
                                   "re-index (middle memory export first)")
        vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(rows), -1)
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), vectors

    @property
    def closed(self) -> bool:
        return self._conn is None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _require_open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise MemoryStoreError(f"the memory store {self.path} is closed")
        return self._conn

    def error(self, exc: BaseException, what: str) -> MemoryStoreError:
        return MemoryStoreError(
            f"{what} the hipporag memory store {self.path}: {exc}. Check that the directory is "
            "writable and the disk not full; if the file is corrupt, move it away to start afresh")
