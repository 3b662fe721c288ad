"""The memory bank on disk: one SQLite file (facts, entities, links, observations, mental models)
plus an in-memory FAISS mirror of the fact vectors, kept in step through a change log."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from backends import retrieval
from backends.storage import CHUNK, SqliteStore

__all__ = ["Bank"]

# 2: the kind of fact vectors is recorded (meta fact_vector_kind, see claim_vector_kind); a
# version 1 bank's facts were embedded alone, and stay valid.
FORMAT_VERSION = 2
FILE_NAME = "hindsight.sqlite3"


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


class Bank(SqliteStore):
    """SQLite is the source of truth and every change one transaction (a killed process leaves
    the last committed state); the FAISS mirror catches up on logged changes before each use,
    so writes by another process or instance are seen at once."""

    def __init__(self, store_dir: Path):
        self._mirror = retrieval.IndexMirror("vectors")
        super().__init__(Path(store_dir) / FILE_NAME, SCHEMA, FORMAT_VERSION, kind="hindsight bank")
        try:
            self.raise_version([1])
        except BaseException:
            self.close()
            raise

    def bump(self, conn: sqlite3.Connection, fact_ids: Sequence[int]) -> int:  # type: ignore[override]
        """Inside a write: log the fact ids whose vectors changed under the next generation."""
        return super().bump(conn, [(i,) for i in fact_ids])

    # --- the vector mirror -------------------------------------------------------------------

    def sync(self, conn: sqlite3.Connection) -> Any:
        """The FAISS mirror brought up to the bank's generation (inside a read or write)."""
        self._mirror.sync(self, conn)
        return self._mirror.index

    def vectors(self, conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, np.ndarray]:
        found: dict[int, np.ndarray] = {}
        ids = list(ids)
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start:start + CHUNK]
            for i, blob in conn.execute(
                    f"SELECT id, vec FROM vectors WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                found[i] = np.frombuffer(blob, dtype=np.float32)
        return found

    def matrix(self, conn: sqlite3.Connection, ids: Sequence[int]) -> tuple[list[int], np.ndarray]:
        """The vectors of ids that have one, as (ids, matrix) in one buffer (no per-row arrays)."""
        found: list[int] = []
        blobs: list[bytes] = []
        ids = list(ids)
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start:start + CHUNK]
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
            super().close()
            self._mirror.invalidate()
