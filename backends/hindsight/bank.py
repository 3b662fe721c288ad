"""The memory bank on disk: one SQLite file (facts, entities, links, observations, mental models)
plus an in-memory FAISS mirror of the fact vectors, kept in step through a change log."""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from orchestrator.plugin_api import MemoryStoreError, retrieval
from backends.sqlite_tx import read_tx, write_tx

FORMAT_VERSION = 1
FILE_NAME = "hindsight.sqlite3"
KEEP_GENERATIONS = 1000
_CHUNK = 500

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, text_hash TEXT NOT NULL,
    text TEXT NOT NULL, source TEXT NOT NULL, retained_at REAL NOT NULL, event_time REAL NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]', extractor TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS documents_by_hash ON documents (text_hash);
CREATE TABLE IF NOT EXISTS facts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, doc_id INTEGER, text TEXT NOT NULL, kind TEXT NOT NULL,
    occurred_start REAL NOT NULL, occurred_end REAL NOT NULL, dated INTEGER NOT NULL,
    mentioned_at REAL NOT NULL, created_at REAL NOT NULL, position INTEGER NOT NULL,
    sources INTEGER NOT NULL DEFAULT 1, version INTEGER NOT NULL DEFAULT 1,
    context TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS facts_by_doc ON facts (doc_id);
CREATE INDEX IF NOT EXISTS facts_by_time ON facts (occurred_start, occurred_end);
CREATE INDEX IF NOT EXISTS facts_by_mention ON facts (mentioned_at);
CREATE VIRTUAL TABLE IF NOT EXISTS fact_fts USING fts5(
    text, context, content='facts', content_rowid='id', tokenize='{retrieval.bm25.FTS_TOKENIZE}');
CREATE TABLE IF NOT EXISTS vectors (id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS entities (
    id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, key TEXT NOT NULL UNIQUE,
    first_seen REAL NOT NULL, last_seen REAL NOT NULL, mentions INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS entity_aliases (alias TEXT PRIMARY KEY, entity_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS entity_words (word TEXT NOT NULL, alias TEXT NOT NULL,
    PRIMARY KEY (word, alias));
CREATE TABLE IF NOT EXISTS fact_entities (
    fact_id INTEGER NOT NULL, entity_id INTEGER NOT NULL, PRIMARY KEY (fact_id, entity_id));
CREATE INDEX IF NOT EXISTS fact_entities_by_entity ON fact_entities (entity_id);
CREATE TABLE IF NOT EXISTS links (
    src INTEGER NOT NULL, dst INTEGER NOT NULL, kind TEXT NOT NULL, weight REAL NOT NULL,
    PRIMARY KEY (src, dst, kind));
CREATE INDEX IF NOT EXISTS links_by_dst ON links (dst);
CREATE TABLE IF NOT EXISTS fact_tags (fact_id INTEGER NOT NULL, tag TEXT NOT NULL,
    PRIMARY KEY (fact_id, tag));
CREATE INDEX IF NOT EXISTS fact_tags_by_tag ON fact_tags (tag);
CREATE TABLE IF NOT EXISTS observation_support (
    obs_id INTEGER NOT NULL, fact_id INTEGER NOT NULL, PRIMARY KEY (obs_id, fact_id));
CREATE INDEX IF NOT EXISTS observation_support_by_fact ON observation_support (fact_id);
CREATE TABLE IF NOT EXISTS observation_history (
    obs_id INTEGER NOT NULL, version INTEGER NOT NULL, text TEXT NOT NULL, changed_at REAL NOT NULL,
    PRIMARY KEY (obs_id, version));
CREATE TABLE IF NOT EXISTS mental_models (
    name TEXT PRIMARY KEY, question TEXT NOT NULL, content TEXT NOT NULL, version INTEGER NOT NULL,
    updated_at REAL NOT NULL, fact_ids TEXT NOT NULL DEFAULT '[]');
CREATE TABLE IF NOT EXISTS mental_model_history (
    name TEXT NOT NULL, version INTEGER NOT NULL, content TEXT NOT NULL, updated_at REAL NOT NULL,
    PRIMARY KEY (name, version));
CREATE TABLE IF NOT EXISTS pending_rounds (
    conversation_id TEXT NOT NULL, seq INTEGER NOT NULL, prompt TEXT NOT NULL,
    response TEXT NOT NULL, PRIMARY KEY (conversation_id, seq));
CREATE TABLE IF NOT EXISTS changes (gen INTEGER NOT NULL, id INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS changes_by_gen ON changes (gen);
"""


class Bank:
    """SQLite is the source of truth and every change one transaction (a killed process leaves
    the last committed state); the FAISS mirror catches up on logged changes before each use,
    so writes by another process or instance are seen at once."""

    def __init__(self, store_dir: Path):
        self.path = Path(store_dir) / FILE_NAME
        self.lock = threading.RLock()
        self._index: Any = None
        self._gen: int | None = None
        self._conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), check_same_thread=False,
                                         isolation_level=None, timeout=60)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            with self.write() as conn:
                has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone()
                version = self._meta(conn, "format_version") if has_meta else None
                if version is not None and int(version) > FORMAT_VERSION:
                    raise MemoryStoreError(
                        f"the hindsight bank {self.path} has format version {version}, newer "
                        f"than this middle-agent reads ({FORMAT_VERSION}): upgrade middle-agent, "
                        "or move the file away to start a new bank")
                for statement in SCHEMA.split(";")[:-1]:
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('format_version', ?)",
                             (str(FORMAT_VERSION),))
        except MemoryStoreError:
            self.close()
            raise
        except (sqlite3.Error, OSError, ValueError) as exc:
            self.close()
            raise self.error(exc, "cannot open") from exc

    # --- transactions ----------------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any error: a failed write changes nothing."""
        with self.lock, write_tx(self._require(), self.error) as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every SELECT in it sees the same committed state."""
        with self.lock, read_tx(self._require(), self.error) as conn:
            yield conn

    @staticmethod
    def _meta(conn: sqlite3.Connection, key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def meta(self, conn: sqlite3.Connection, key: str) -> str | None:
        return self._meta(conn, key)

    def meta_json(self, conn: sqlite3.Connection, key: str, default: Any) -> Any:
        """A JSON meta value; a value that is not JSON is a corrupt bank, said with its path."""
        raw = self._meta(conn, key)
        if raw is None:
            return default
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise MemoryStoreError(f"the hindsight bank {self.path} is corrupt (meta {key!r} is "
                                   f"not JSON: {exc}); move the file away to start afresh") from None

    def set_meta(self, conn: sqlite3.Connection, key: str, value: Any) -> None:
        conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                     (key, value if isinstance(value, str) else json.dumps(value)))

    def bump(self, conn: sqlite3.Connection, fact_ids: Sequence[int]) -> int:
        """Inside a write: log the fact ids whose vectors changed under the next generation."""
        gen = int(self._meta(conn, "generation") or 0) + 1
        self.set_meta(conn, "generation", str(gen))
        conn.executemany("INSERT INTO changes (gen, id) VALUES (?, ?)", [(gen, i) for i in fact_ids])
        if gen % 100 == 0 and gen > KEEP_GENERATIONS:
            floor = gen - KEEP_GENERATIONS
            conn.execute("DELETE FROM changes WHERE gen <= ?", (floor,))
            self.set_meta(conn, "changes_floor", str(floor))
        return gen

    # --- the vector mirror -------------------------------------------------------------------

    def sync(self, conn: sqlite3.Connection) -> Any:
        """The FAISS mirror brought up to the bank's generation (inside a read or write)."""
        gen = int(self._meta(conn, "generation") or 0)
        floor = int(self._meta(conn, "changes_floor") or 0)
        if self._gen == gen:
            return self._index
        if self._gen is None or self._gen < floor or self._gen > gen:
            self._index = None
            self._add(conn.execute("SELECT id, vec FROM vectors ORDER BY id").fetchall())
        else:
            ids = [r[0] for r in conn.execute(
                "SELECT DISTINCT id FROM changes WHERE gen > ? AND gen <= ?", (self._gen, gen))]
            if self._index is not None and ids:
                self._index.remove(ids)
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start:start + _CHUNK]
                self._add(conn.execute(f"SELECT id, vec FROM vectors WHERE id IN "
                                       f"({','.join('?' * len(chunk))})", chunk).fetchall())
        self._gen = gen
        return self._index

    def _add(self, rows: list[tuple[int, bytes]]) -> None:
        if not rows:
            return
        vectors = np.vstack([np.frombuffer(blob, dtype=np.float32) for _, blob in rows])
        if self._index is None or (len(self._index) == 0 and self._index.dimension != vectors.shape[1]):
            self._index = retrieval.VectorIndex(vectors.shape[1])
        self._index.add(np.asarray([r[0] for r in rows], dtype=np.int64), vectors)

    def forget_mirror(self) -> None:
        """Drop the mirror (after a rolled-back write that may have synced ahead of the disk)."""
        self._index, self._gen = None, None

    def vectors(self, conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, np.ndarray]:
        found: dict[int, np.ndarray] = {}
        ids = list(ids)
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start:start + _CHUNK]
            for i, blob in conn.execute(
                    f"SELECT id, vec FROM vectors WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                found[i] = np.frombuffer(blob, dtype=np.float32)
        return found

    def matrix(self, conn: sqlite3.Connection, ids: Sequence[int]) -> tuple[list[int], np.ndarray]:
        """The vectors of ids that have one, as (ids, matrix) in one buffer (no per-row arrays)."""
        found: list[int] = []
        blobs: list[bytes] = []
        ids = list(ids)
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start:start + _CHUNK]
            for i, blob in conn.execute(
                    f"SELECT id, vec FROM vectors WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                found.append(i)
                blobs.append(blob)
        if not found:
            return [], np.zeros((0, 0), dtype=np.float32)
        return found, np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(found), -1)

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._index, self._gen = None, None

    @property
    def closed(self) -> bool:
        return self._conn is None

    def _require(self) -> sqlite3.Connection:
        if self._conn is None:
            raise MemoryStoreError(f"the hindsight bank {self.path} is closed")
        return self._conn

    def error(self, exc: BaseException, what: str) -> MemoryStoreError:
        return MemoryStoreError(
            f"{what} the hindsight bank {self.path}: {exc}. Check that the directory is writable "
            "and the disk not full; if the file is corrupt, move it away to start afresh")


def in_clause(ids: Sequence[Any]) -> str:
    """'(?,?,...)' for an IN over ids (callers chunk long lists)."""
    return "(" + ",".join("?" * len(ids)) + ")"
