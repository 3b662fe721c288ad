"""The memory bank: one SQLite file, or the project's schema in PostgreSQL with `[memory] url`
(facts, entities, links, observations, mental models), plus an in-memory FAISS mirror of the fact
vectors, kept in step through a change log, and a keyword index of the facts (FTS5 on SQLite,
BM25 postings on PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from backends import retrieval
from backends.pg_storage import PgStore
from backends.storage import CountedWrites, SqliteStore, Store
from orchestrator.plugin_api import MemoryDatabase

from . import pg_keywords

__all__ = ["Bank", "PgBank", "open_bank"]

# 2: the kind of fact vectors is recorded (meta fact_vector_kind, see claim_vector_kind); a
# version 1 bank's facts were embedded alone, and stay valid.
FORMAT_VERSION = 2
FILE_NAME = "hindsight.sqlite3"
# Every write of a document's text or time counts (fingerprint: a document rewritten in place),
# and is logged by its id, so a document another program wrote is caught up (rederive.CatchesUp)
COUNTED = CountedWrites("documents", ("text_hash", "text", "event_time"), key="id")


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


# The keyword index on PostgreSQL: each fact's lexemes with their counts in its text and in its
# context, and its length in lexemes (FTS5's bm25 over the two columns, computed in SQL).
PG_KEYWORD_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS fact_postings (
        term TEXT COLLATE "C" NOT NULL, fact_id BIGINT NOT NULL, tf_text INTEGER NOT NULL,
        tf_context INTEGER NOT NULL, PRIMARY KEY (term, fact_id))""",
    "CREATE INDEX IF NOT EXISTS fact_postings_by_fact ON fact_postings (fact_id)",
    "CREATE TABLE IF NOT EXISTS fact_lengths (fact_id BIGINT PRIMARY KEY, len BIGINT NOT NULL)",
]


class BankParts(Store):
    """What the bank does alike on both engines: the change log of fact vectors and the FAISS
    mirror. The keyword index is each engine's own (`Bank`, `PgBank`)."""

    _mirror: Any

    def _opened(self) -> None:
        """Just opened: a version 1 bank is read as it is, and marked as this version's."""
        try:
            self.raise_version([1])
        except BaseException:
            self.close()
            raise

    def bump(self, conn: Any, fact_ids: Sequence[int]) -> int:  # type: ignore[override]
        """Inside a write: log the fact ids whose vectors changed under the next generation."""
        return super().bump(conn, [(i,) for i in fact_ids])

    # --- the vector mirror -------------------------------------------------------------------

    def sync(self, conn: Any) -> Any:
        """The FAISS mirror brought up to the bank's generation (inside a read or write)."""
        self._mirror.sync(self, conn)
        return self._mirror.index

    def vectors(self, conn: Any, ids: Sequence[int]) -> dict[int, np.ndarray]:
        found, matrix = self.matrix(conn, ids)
        return {i: matrix[n] for n, i in enumerate(found)}

    def matrix(self, conn: Any, ids: Sequence[int]) -> tuple[list[int], np.ndarray]:
        """The vectors of ids that have one, as (ids, matrix) in one buffer (no per-row arrays)."""
        found, vectors = self.vector_rows(conn, "vectors", list(ids))
        if vectors is None:
            return [], np.zeros((0, 0), dtype=np.float32)
        return [int(i) for i in found], vectors

    # --- the keyword index (inside a write, or a read for the searches) ----------------------

    def index_text(self, conn: Any, fact_id: int, text: str, context: str) -> None:
        raise NotImplementedError

    def unindex_text(self, conn: Any, fact_id: int, text: str, context: str) -> None:
        raise NotImplementedError

    def keyword(self, conn: Any, terms: Sequence[str], k: int, context_weight: float
                ) -> list[tuple[int, float]]:
        """(fact id, BM25 score) of the k best facts holding any of the terms, best first."""
        raise NotImplementedError

    def term_count(self, conn: Any, term: str, cap: int) -> int:
        """How many facts hold the term, counted up to cap."""
        raise NotImplementedError

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        with self.lock:
            super().close()  # type: ignore[safe-super]
            self._mirror.invalidate()


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


class Bank(BankParts, SqliteStore):
    """SQLite is the source of truth and every change one transaction (a killed process leaves
    the last committed state); the FAISS mirror catches up on logged changes before each use,
    so writes by another process or instance are seen at once."""

    def __init__(self, store_dir: Path):
        self._mirror = retrieval.IndexMirror("vectors")
        SqliteStore.__init__(self, Path(store_dir) / FILE_NAME, SCHEMA, FORMAT_VERSION, kind="hindsight bank",
                             counted=COUNTED)
        self._opened()

    def index_text(self, conn: Any, fact_id: int, text: str, context: str) -> None:
        conn.execute("INSERT INTO fact_fts (rowid, text, context) VALUES (?, ?, ?)", (fact_id, text, context))

    def unindex_text(self, conn: Any, fact_id: int, text: str, context: str) -> None:
        conn.execute("INSERT INTO fact_fts (fact_fts, rowid, text, context) VALUES ('delete', ?, ?, ?)",
                     (fact_id, text, context))

    def keyword(self, conn: Any, terms: Sequence[str], k: int, context_weight: float
                ) -> list[tuple[int, float]]:
        if not terms or k <= 0:
            return []
        rows = conn.execute(
            f"SELECT rowid, bm25(fact_fts, 1.0, {float(context_weight)}) AS s FROM fact_fts WHERE fact_fts "
            "MATCH ? ORDER BY s LIMIT ?", (" OR ".join(_quoted(t) for t in terms), k)).fetchall()
        return [(int(i), -float(s)) for i, s in rows]  # FTS5 negates bm25 so ascending is best

    def term_count(self, conn: Any, term: str, cap: int) -> int:
        return int(conn.execute("SELECT COUNT(*) FROM (SELECT 1 FROM fact_fts WHERE fact_fts MATCH ? "
                                "LIMIT ?)", (_quoted(term), cap)).fetchone()[0])


class PgBank(BankParts, PgStore):
    """The bank as the project's schema in PostgreSQL: the same tables (the keyword index as
    BM25 postings), so every machine of the fleet reads and writes one bank."""

    def __init__(self, database: MemoryDatabase):
        self._mirror = retrieval.IndexMirror("vectors")
        PgStore.__init__(self, database, "hindsight", SCHEMA, FORMAT_VERSION, kind="hindsight bank",
                         extra_schema=PG_KEYWORD_SCHEMA, counted=COUNTED)
        self._opened()

    def index_text(self, conn: Any, fact_id: int, text: str, context: str) -> None:
        lexemes = pg_keywords.lexemes(conn, text, context)
        conn.executemany("INSERT INTO fact_postings VALUES (?, ?, ?, ?)",
                         [(term, fact_id, t, c) for term, (t, c) in lexemes.items()])
        conn.execute("INSERT INTO fact_lengths VALUES (?, ?) ON CONFLICT (fact_id) DO UPDATE SET len = "
                     "excluded.len", (fact_id, sum(t + c for t, c in lexemes.values())))

    def unindex_text(self, conn: Any, fact_id: int, text: str, context: str) -> None:
        conn.execute("DELETE FROM fact_postings WHERE fact_id = ?", (fact_id,))
        conn.execute("DELETE FROM fact_lengths WHERE fact_id = ?", (fact_id,))

    def keyword(self, conn: Any, terms: Sequence[str], k: int, context_weight: float
                ) -> list[tuple[int, float]]:
        return pg_keywords.search(conn, terms, k, context_weight)

    def term_count(self, conn: Any, term: str, cap: int) -> int:
        return pg_keywords.count(conn, term, cap)


def open_bank(store_dir: Path, database: MemoryDatabase | None) -> BankParts:
    """The project's bank: in the database when one is given, else the SQLite file."""
    return PgBank(database) if database is not None else Bank(store_dir)
