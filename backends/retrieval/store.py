"""One retrieval store: SQLite (docs, vectors, FTS5, change log) plus an in-memory FAISS mirror."""

from __future__ import annotations

import hashlib
import logging
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from backends.storage import CHUNK, CountedWrites, SqliteStore, hash_range, inserted_id
from orchestrator.plugin_api import MemoryRecord, MemoryStoreError  # noqa: F401 - MemoryRecord re-exported

from . import bm25, outside
from .chunking import CHUNK_SLOTS
from .mirror import ChunkMirror
from .vector import VectorIndex

log = logging.getLogger("middle.retrieval.store")

# 2: a doc's vectors are its chunks' (see chunking.py), in `chunks`; version 1 stores kept one
# vector of the doc's first 256 tokens in `vectors` and must be reindexed.
# 3: docs written by other programs are logged by triggers and caught up (outside.py); an older
# middle-agent, which does not clear its own writes from the log, must not write a version 3 store.
FORMAT_VERSION = 3
# At most this many id prefixes in one query (SQLite binds 32,766 values at most); a block
# shows a few dozen docs, so one query.
PREFIXES_PER_QUERY = 1000
SNAPSHOT_MIN_DOCS = 2000  # below this, reloading vectors from SQLite is as fast as a snapshot
STALE_TMP_S = 60  # a temp file older than this is a crashed writer's leftover
# Every write of a doc's text or time counts, not a recall's access counts (see fingerprint)
COUNTED = CountedWrites("docs", ("hash", "text", "doc_time"))


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
CREATE TABLE IF NOT EXISTS chunks (id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS changes (gen INTEGER NOT NULL, id INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS changes_by_gen ON changes (gen);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
    text, content='docs', content_rowid='id', tokenize='{bm25.FTS_TOKENIZE}');
{outside.SCHEMA}"""


@dataclass
class DocRow:
    id: int
    text: str
    doc_time: float
    importance: int


def doc_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class RetrievalStore(outside.CatchUp, SqliteStore):
    """Thread-safe (one RLock); process-safe through SQLite transactions and the change log.

    SQLite is the source of truth; every write is one transaction that also bumps a generation
    counter and logs the ids it touched. The FAISS index in memory is only a mirror: before each
    call it catches up on the changes logged since its generation, so another process (or
    another instance) writing the same store is seen at once, and a crash leaves the last
    committed state.
    """

    chunk_tables = {"chunks": CHUNK_SLOTS}

    def __init__(self, path: Path, *, use_vectors: bool):
        self.use_vectors = use_vectors
        self._mirror = ChunkMirror("chunks")  # the FAISS index as of a generation
        self._ready = False  # catch up on others' writes only once the log's triggers are laid
        super().__init__(path, SCHEMA, FORMAT_VERSION, counted=COUNTED)
        with self.write() as conn:
            # A new store indexes code terms with each doc; one written before keeps its FTS
            # rows as they are (a doc's row must be deleted with the text it was added with).
            empty = conn.execute("SELECT 1 FROM docs LIMIT 1").fetchone() is None
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('fts_terms', ?)",
                         (bm25.CODE_TERMS if empty else "plain",))
            self.code_terms = self.meta(conn, "fts_terms") == bm25.CODE_TERMS
            for trigger in outside.TRIGGERS:
                conn.execute(trigger)
            if self.meta(conn, "format_version") == "2":  # reads as it is, with the log from now on
                self.set_meta(conn, "format_version", str(FORMAT_VERSION))
        self._ready = True
        self._clean_temp_files()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:  # type: ignore[override]
        """A write transaction that first catches up on docs other programs wrote (outside.py):
        a write of middle's own on a doc rewritten by hand would otherwise delete the keyword row
        of a text the index does not hold."""
        with super().write() as conn:
            if self._ready and outside.pending(conn):
                self._catch_up(conn)
            yield conn

    def _pending(self) -> tuple[bool, bool]:
        with self.read() as conn:
            return outside.pending_and_waiting(conn)

    def _catch_up(self, conn: sqlite3.Connection) -> None:
        touched = outside.catch_up(conn, self._fts, doc_hash, self._drop_vectors, self.use_vectors)
        if touched:
            log.info("caught up on %d doc(s) written to %s by another program", len(touched), self.path)
            self.bump(conn, touched)

    @staticmethod
    def _drop_vectors(conn: sqlite3.Connection, doc_id: int) -> None:
        conn.execute("DELETE FROM vectors WHERE id = ?", (doc_id,))  # a version 1 store's
        conn.execute("DELETE FROM chunks WHERE id >= ? AND id < ?",
                     (doc_id * CHUNK_SLOTS, (doc_id + 1) * CHUNK_SLOTS))

    def wanting_vectors(self) -> dict[int, str]:
        """Docs rewritten by another program whose vectors are to be made again, by id."""
        with self.read() as conn:
            return outside.wanting_vectors(conn)

    def put_made_vectors(self, made: dict[int, tuple[str, np.ndarray]]) -> None:
        """Store vectors made for `wanting_vectors()` docs whose text is still the one embedded."""
        with self.write() as conn:
            done = []
            for doc_id, (text, vectors) in made.items():
                row = conn.execute("SELECT text FROM docs WHERE id = ?", (doc_id,)).fetchone()
                if row is not None and row[0] == text:
                    self.put_chunks(conn, doc_id, vectors)
                    outside.vectors_made(conn, doc_id)
                    done.append(doc_id)
            if done:
                self.bump(conn, done)

    def bump(self, conn: sqlite3.Connection, ids: Sequence[int]) -> int:  # type: ignore[override]
        """Inside a write: log the touched doc ids under the next generation and return it."""
        return super().bump(conn, [(i,) for i in ids])

    # --- the FAISS mirror --------------------------------------------------------------

    def sync(self) -> "ChunkSearch | None":
        """Bring the in-memory index up to the database's generation; return its search. A
        mirror not loaded yet (or behind the log) starts from the newest usable snapshot."""
        self.catch_up()  # a doc rewritten by another program leaves the index with its old vectors
        if not self.use_vectors:
            return None
        return ChunkSearch(self._sync_index())

    def _sync_index(self) -> VectorIndex | None:
        with self.read() as conn:
            gen, floor = self.generation(conn)
            held = self._mirror.gen
            started = None
            if held is None or held < floor or held > gen:
                started = self._from_snapshot(floor, gen)
            self._mirror.sync(self, conn)
            if started is not None:
                self._check_snapshot(conn, started)
        return self._mirror.index

    def _from_snapshot(self, floor: int, gen: int) -> Path | None:
        """Start the mirror from the newest usable snapshot; returns its path, or None."""
        self._mirror.invalidate()
        snapshot = self._best_snapshot(floor, gen)
        if snapshot is None:
            return None
        path, snap_gen = snapshot
        try:
            self._mirror.start(VectorIndex.load(path), snap_gen)
        except (MemoryStoreError, OSError) as exc:
            self._drop_snapshot(path, str(exc))
            return None
        return path

    def _check_snapshot(self, conn: sqlite3.Connection, path: Path) -> None:
        """A snapshot caught up to the database must hold exactly its vector rows: one whose
        checksum matches but which lacks rows (or holds others) was saved wrong or from another
        store, and is dropped like a damaged one."""
        index = self._mirror.index
        held = np.sort(index.ids()) if index is not None else np.zeros(0, dtype=np.int64)
        rows = np.fromiter((r[0] for r in conn.execute("SELECT id FROM chunks ORDER BY id")),
                           dtype=np.int64)
        if len(held) != len(rows) or not np.array_equal(held, rows):
            self._drop_snapshot(path, f"it holds {len(held)} vectors where the store holds "
                                      f"{len(rows)}" if len(held) != len(rows) else
                                      "its vectors are not the store's")
            self._mirror.sync(self, conn)

    def _drop_snapshot(self, path: Path, why: str) -> None:
        # The vectors are rows of the database too: rebuild from them, and drop the bad
        # file so the next snapshot (of the same generation, maybe) is written afresh.
        log.warning("Ignoring the vector snapshot %s (%s): the index is rebuilt from the "
                    "vectors in %s", path, why, self.path)
        self._mirror.invalidate()
        path.unlink(missing_ok=True)

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
        with self.lock:
            if self.seen_damage:  # already reported; a snapshot would only fail the same way
                return None
            if not self.use_vectors or self._too_few_for_a_snapshot():
                return None
            index = self._sync_index()
            gen = self._mirror.gen
            if index is None or len(index) < SNAPSHOT_MIN_DOCS or gen is None:
                return None
            target = self.path.with_name(f"{self.path.stem}.g{gen}.faiss")
            if not target.exists():
                index.save(target)
            for path, snap_gen in self._snapshots():
                if snap_gen < gen:
                    path.unlink(missing_ok=True)
            return target

    def _too_few_for_a_snapshot(self) -> bool:
        """Fewer vector rows than a snapshot is worth, counted without building the mirror: a
        command that never searched (`memory list`, `show`, `delete`) closes without loading
        FAISS and every vector only to find the store too small to save."""
        if self._mirror.gen is not None:
            return False  # loaded already: its size is checked below, after catching up
        with self.read() as conn:
            rows = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        return rows < SNAPSHOT_MIN_DOCS

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

    def insert(self, conn: sqlite3.Connection, record: MemoryRecord, vectors: np.ndarray | None,
               now: float) -> int | None:
        """Add a doc; None when the exact text is already stored (another writer was first)."""
        cur = conn.execute(
            "INSERT OR IGNORE INTO docs (hash, text, created_at, doc_time, importance) "
            "VALUES (?, ?, ?, ?, ?)",
            (doc_hash(record.text), record.text, now,
             record.timestamp if record.timestamp is not None else now, record.importance or 3))
        if cur.rowcount == 0:
            return None
        rowid = inserted_id(cur)
        conn.execute("INSERT INTO fts (rowid, text) VALUES (?, ?)", (rowid, self._fts(record.text)))
        outside.forget_own(conn, rowid)
        if vectors is not None:
            self.put_chunks(conn, rowid, vectors)
        return rowid

    @staticmethod
    def put_chunks(conn: sqlite3.Connection, doc_id: int, vectors: np.ndarray) -> None:
        """A doc's chunk vectors (n, d) under ids doc_id * CHUNK_SLOTS + n, replacing any."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, vectors.shape[-1])
        conn.execute("DELETE FROM chunks WHERE id >= ? AND id < ?",
                     (doc_id * CHUNK_SLOTS, (doc_id + 1) * CHUNK_SLOTS))
        conn.executemany("INSERT INTO chunks (id, vec) VALUES (?, ?)",
                         [(doc_id * CHUNK_SLOTS + n, v.tobytes()) for n, v in enumerate(vectors)])

    def replace(self, conn: sqlite3.Connection, doc_id: int, record: MemoryRecord,
                vectors: np.ndarray | None, now: float) -> bool:
        """Update a doc in place with a newer near-duplicate: its text, vector and
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
        outside.forget_own(conn, doc_id)
        if vectors is not None:
            self.put_chunks(conn, doc_id, vectors)
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
        self._drop_vectors(conn, doc_id)
        outside.forget_own(conn, doc_id)
        conn.execute(f"DELETE FROM {outside.NEEDS_VECTORS} WHERE id = ?", (doc_id,))

    # --- queries -----------------------------------------------------------------------

    def rows(self, ids: Sequence[int]) -> dict[int, DocRow]:
        found: dict[int, DocRow] = {}
        with self.read() as conn:
            for start in range(0, len(ids), CHUNK):
                chunk = list(ids[start:start + CHUNK])
                for r in conn.execute(
                    "SELECT id, text, doc_time, importance FROM docs WHERE id IN "
                    f"({','.join('?' * len(chunk))})", chunk):
                    found[r[0]] = DocRow(r[0], r[1], r[2], r[3])
        return found

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Each doc's chunk vectors (n_chunks, d)."""
        with self.read() as conn:
            chunk_id, vectors = self.vector_rows(conn, "chunks", list(ids))
        if vectors is None:
            return {}
        docs = chunk_id // CHUNK_SLOTS
        return {int(d): vectors[docs == d] for d in np.unique(docs)}

    def ids_by_text(self, conn: sqlite3.Connection, texts: Sequence[str]) -> dict[str, int]:
        found = {}
        for text in texts:
            row = conn.execute("SELECT id FROM docs WHERE hash = ?", (doc_hash(text),)).fetchone()
            if row is not None:
                found[text] = int(row[0])
        return found

    @staticmethod
    def doc_texts(conn: sqlite3.Connection) -> dict[int, str]:
        """Every doc's text by id (inside a transaction)."""
        return {int(i): t for i, t in conn.execute("SELECT id, text FROM docs")}

    def bm25(self, query: str, k: int) -> list[tuple[int, float]]:
        self.catch_up()
        with self.read() as conn:
            return bm25.search(conn, "fts", query, k, self.code_terms)

    def recent(self, n: int) -> list[int]:
        """Ids of the n newest docs by event time, newest first."""
        with self.read() as conn:
            return [r[0] for r in conn.execute(
                "SELECT id FROM docs ORDER BY doc_time DESC, id DESC LIMIT ?", (n,))]

    def containing(self, needle: str, limit: int) -> list[tuple[int, str]]:
        """The newest `limit` docs whose text contains `needle` (a plain substring: no `%` or
        `_`), as (id, text), newest first by time order (doc_time, then id)."""
        with self.read() as conn:
            return [(int(i), text) for i, text in conn.execute(
                "SELECT id, text FROM docs WHERE instr(text, ?) > 0 "
                "ORDER BY doc_time DESC, id DESC LIMIT ?", (needle, limit))]

    def around(self, ids: Sequence[int], reach: int) -> dict[int, list[tuple[int, int, str]]]:
        """For each doc id, the `reach` docs before and after it in time order (doc_time, then
        id) as (id, docs away, text); an id no longer stored has none."""
        out: dict[int, list[tuple[int, int, str]]] = {}
        with self.read() as conn:
            for doc_id in ids:
                row = conn.execute("SELECT doc_time FROM docs WHERE id = ?", (doc_id,)).fetchone()
                if row is None:
                    continue
                key = (row[0], doc_id, reach)
                before = conn.execute(
                    "SELECT id, text FROM docs WHERE (doc_time, id) < (?, ?) "
                    "ORDER BY doc_time DESC, id DESC LIMIT ?", key).fetchall()
                after = conn.execute(
                    "SELECT id, text FROM docs WHERE (doc_time, id) > (?, ?) "
                    "ORDER BY doc_time, id LIMIT ?", key).fetchall()
                out[doc_id] = [(int(i), n, text) for part in (before, after)
                               for n, (i, text) in enumerate(part, start=1)]
        return out

    def texts(self) -> list[str]:
        with self.read() as conn:
            return [r[0] for r in conn.execute("SELECT text FROM docs ORDER BY id")]

    def texts_by_hash_prefix(self, prefix: str) -> list[str]:
        """The docs whose hash starts with `prefix`: a range of the hash's unique index."""
        low, high = hash_range(prefix)
        with self.read() as conn:
            return [r[0] for r in conn.execute("SELECT text, hash FROM docs WHERE hash >= ? AND "
                                               "hash <= ? ORDER BY id", (low, high))
                    if str(r[1]).startswith(prefix)]

    def texts_by_hash_prefixes(self, prefixes: Sequence[str]) -> list[str]:
        """The docs whose hash starts with any of `prefixes`, each once, oldest first: one
        query reading a range of the hash's unique index per prefix."""
        prefixes = list(dict.fromkeys(prefixes))
        found: dict[int, tuple[str, str]] = {}
        with self.read() as conn:
            for start in range(0, len(prefixes), PREFIXES_PER_QUERY):
                part = prefixes[start:start + PREFIXES_PER_QUERY]
                rows = ", ".join(["(?, ?)"] * len(part))
                found.update((int(r[0]), (r[1], r[2])) for r in conn.execute(
                    f"WITH r (low, high) AS (VALUES {rows}) SELECT d.id, d.text, d.hash FROM r "
                    "JOIN docs d ON d.hash >= r.low AND d.hash <= r.high",
                    [bound for prefix in part for bound in hash_range(prefix)]))
        return [text for _, (text, hashed) in sorted(found.items()) if str(hashed).startswith(tuple(prefixes))]

    def count(self) -> int:
        with self.read() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM docs").fetchone()[0])

    def doc_time(self, text: str) -> float | None:
        """The time the doc is dated by, found by its hash (the unique index), or None."""
        with self.read() as conn:
            row = conn.execute("SELECT text, doc_time FROM docs WHERE hash = ?", (doc_hash(text),)).fetchone()
        return float(row[1]) if row is not None and row[0] == text else None

    def fingerprint(self) -> str:
        """How many docs, the newest id given (AUTOINCREMENT: never given twice) and how many
        writes of the docs' text or time the store counted (COUNTED: by triggers, so a doc
        rewritten in place by any tool moves it too); a recall's access counts do not."""
        with self.read() as conn:
            count, newest = conn.execute("SELECT COUNT(*), COALESCE(MAX(id), 0) FROM docs").fetchone()
            writes = self.doc_writes(conn)
        return f"{count}:{newest}:{writes}"

    def touch(self, ids: Sequence[int], now: float) -> None:
        """Access count and last-accessed time; not a content change, no generation."""
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

    # --- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        with self.lock:
            super().close()
            self._mirror.invalidate()


class ChunkSearch:
    """What `sync()` returns: the chunk index searched for docs (`chunking.best_docs` collapses
    a doc's chunks to its best)."""

    def __init__(self, index: VectorIndex | None):
        self.index = index

    def __len__(self) -> int:
        return 0 if self.index is None else len(self.index)

    def search(self, query: np.ndarray, k: int) -> tuple[list[int], list[float]]:
        """Doc ids (one per chunk, so a doc may repeat) and cosine scores, best first."""
        if self.index is None:
            return [], []
        ids, scores = self.index.search(query, k)
        return [i // CHUNK_SLOTS for i in ids], scores
