"""The graph store: one SQLite file, or the project's schema in PostgreSQL with `[memory] url`
(passages, entities, facts, edges with their contributors, vectors)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from backends.pg_storage import PgStore
from backends.retrieval.chunking import CHUNK_SLOTS
from backends.storage import CountedWrites, SqliteStore, Store
from orchestrator.plugin_api import MemoryDatabase

# 2: the kind of fact vectors is recorded (meta fact_vector_kind, see HippoRAGBackend); a
# version 1 store's facts were embedded alone or from their names, and stay valid.
# 3: a passage's vectors are its chunks' (passage_chunks, see retrieval.chunking); a store of
# an older version held one vector of its first 256 tokens and must be reindexed (the
# version is raised when the chunking is recorded, on a store without passages).
FORMAT_VERSION = 3

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
CREATE TABLE IF NOT EXISTS passage_chunks (id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS entity_vectors (id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS fact_vectors (id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS changes (gen INTEGER NOT NULL, kind TEXT NOT NULL, id INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS changes_by_gen ON changes (gen);
"""

VECTOR_TABLES = {"p": "passage_chunks", "e": "entity_vectors", "f": "fact_vectors"}
# Every write of a passage's text or time counts (fingerprint: a passage rewritten in place),
# and is logged by its id, so a passage another program wrote is caught up (rederive.CatchesUp)
COUNTED = CountedWrites("passages", ("hash", "text", "created_at"), key="id")


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


class GraphStore(SqliteStore):
    """SQLite in WAL mode; every write is one transaction that bumps a generation counter."""

    chunk_tables = {"passage_chunks": CHUNK_SLOTS}

    def __init__(self, path: Path):
        super().__init__(path, SCHEMA, FORMAT_VERSION, kind="hipporag memory store", counted=COUNTED)


class PgGraphStore(PgStore):
    """The graph store as the project's schema in PostgreSQL: the same tables and SQL, so
    every machine of the fleet reads and writes one graph (each catching up from `changes`)."""

    chunk_tables = {"passage_chunks": CHUNK_SLOTS}

    def __init__(self, database: MemoryDatabase):
        super().__init__(database, "hipporag", SCHEMA, FORMAT_VERSION, kind="hipporag memory store",
                         counted=COUNTED)


def open_graph_store(store_dir: Path, database: MemoryDatabase | None) -> Store:
    """The project's graph store: in the database when one is given, else the SQLite file."""
    return PgGraphStore(database) if database is not None else GraphStore(Path(store_dir) / "hipporag.sqlite3")
