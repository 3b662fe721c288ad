"""The tables of the sliding-window backend (messages, summary rows and project docs): a SQLite
file in WAL mode, or the project's schema in PostgreSQL with `[memory] url`."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

from backends.pg_storage import PgStore
from backends.storage import CountedWrites, SqliteStore, hash_range, inserted_id
from orchestrator.plugin_api import MemoryDatabase

FORMAT_VERSION = 1
# Project docs live as messages of this reserved conversation; the colons keep it from
# colliding with a ticket id (conversation ids of tickets are never allowed to use it).
PROJECT_CONVERSATION = ":project:"
# Every write of a project doc's text or time counts, not the watched rounds of tickets
# (see SlidingWindowBackend.fingerprint), each logged by its seq: a project doc another program
# wrote is caught up (SlidingWindowBackend._rederive)
COUNTED = CountedWrites("messages", ("text", "created_at"), only=("conversation_id", PROJECT_CONVERSATION),
                         key="seq")
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS conversations (
    conversation_id TEXT PRIMARY KEY,
    next_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS messages (
    conversation_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE TABLE IF NOT EXISTS memory (
    memory_id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL,
    memory_text TEXT NOT NULL DEFAULT '',
    start_sequence INTEGER NOT NULL,
    end_sequence INTEGER NOT NULL,
    base_memory_id INTEGER REFERENCES memory(memory_id),
    status TEXT NOT NULL DEFAULT 'processing',
    created_at REAL NOT NULL,
    generation_time_ms INTEGER
);
CREATE INDEX IF NOT EXISTS idx_memory_conversation_status
    ON memory (conversation_id, status, end_sequence DESC);
CREATE TABLE IF NOT EXISTS docs (
    doc_hash TEXT PRIMARY KEY,
    seq INTEGER NOT NULL
);
"""

MEMORY_COLUMNS = (
    "memory_id, conversation_id, memory_text, start_sequence, end_sequence, base_memory_id, "
    "status, created_at, generation_time_ms"
)


def doc_hash(doc: str) -> str:
    """Key of a project doc: exact-string identity without indexing megabytes of text."""
    return hashlib.sha256(doc.encode("utf-8", "surrogatepass")).hexdigest()


class Store(SqliteStore):
    """One SQLite connection shared by the caller's threads and the summary threads.

    A single connection behind an RLock keeps this simple; the slow part (the LLM call) runs
    outside the lock, so the lock is only held for short queries.
    """

    def __init__(self, path: Path):
        super().__init__(Path(path).resolve(), SCHEMA, FORMAT_VERSION,
                         kind="sliding-window memory store", row_factory=sqlite3.Row,
                         foreign_keys=True, counted=COUNTED)

    def tx(self) -> Any:
        """A write transaction (BEGIN IMMEDIATE, so another process waits rather than races)."""
        return self.write()


class PgWindowStore(PgStore):
    """The same tables as the project's schema in PostgreSQL: every machine of the fleet reads
    and writes one window and one summary chain (rows read by column name, as sqlite3.Row)."""

    def __init__(self, database: MemoryDatabase):
        super().__init__(database, "sliding_window", SCHEMA, FORMAT_VERSION,
                         kind="sliding-window memory store", counted=COUNTED)

    def tx(self) -> Any:
        """A write transaction, under the store's write lock (another writer waits)."""
        return self.write()


def open_store(path: Path, database: MemoryDatabase | None) -> Store | PgWindowStore:
    """The backend's store: in the database when one is given, else the SQLite file."""
    return PgWindowStore(database) if database is not None else Store(path)


# Queries below take a connection from Store.tx()/Store.read(), so callers compose them
# into one transaction.


def append_messages(
    conn: sqlite3.Connection, cid: str, items: list[tuple[str, str]], now: float
) -> list[int]:
    """Append (role, text) messages with the next sequence numbers; return their seqs."""
    conn.execute("INSERT INTO conversations (conversation_id) VALUES (?) ON CONFLICT DO NOTHING", (cid,))
    (next_seq,) = conn.execute(
        "SELECT next_seq FROM conversations WHERE conversation_id = ?", (cid,)
    ).fetchone()
    seqs = list(range(next_seq, next_seq + len(items)))
    conn.executemany(
        "INSERT INTO messages (conversation_id, seq, role, text, created_at) VALUES (?,?,?,?,?)",
        [(cid, seq, role, text, now) for seq, (role, text) in zip(seqs, items)],
    )
    conn.execute(
        "UPDATE conversations SET next_seq = ? WHERE conversation_id = ?",
        (next_seq + len(items), cid),
    )
    return seqs


def messages(
    conn: sqlite3.Connection, cid: str, start: int = 0, end: int | None = None
) -> list[dict[str, Any]]:
    """Messages of a conversation with start <= seq <= end, oldest first."""
    rows = conn.execute(
        "SELECT seq, role, text FROM messages WHERE conversation_id = ? AND seq >= ? "
        "AND seq <= ? ORDER BY seq",
        (cid, start, end if end is not None else 2**62),
    ).fetchall()
    return [{"seq": r["seq"], "role": r["role"], "text": r["text"]} for r in rows]


def last_messages(conn: sqlite3.Connection, cid: str, count: int) -> list[tuple[str, str]]:
    """The conversation's last `count` (role, text) messages, oldest first."""
    rows = conn.execute(
        "SELECT role, text FROM messages WHERE conversation_id = ? ORDER BY seq DESC LIMIT ?", (cid, count)
    ).fetchall()
    return [(r["role"], r["text"]) for r in reversed(rows)]


def live_seqs(conn: sqlite3.Connection, cid: str) -> list[int]:
    rows = conn.execute(
        "SELECT seq FROM messages WHERE conversation_id = ? ORDER BY seq", (cid,)
    ).fetchall()
    return [r[0] for r in rows]


def get_memory(conn: sqlite3.Connection, memory_id: int) -> dict[str, Any] | None:
    row = conn.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memory WHERE memory_id = ?", (memory_id,)
    ).fetchone()
    return dict(row) if row else None


def latest_completed(conn: sqlite3.Connection, cid: str) -> dict[str, Any] | None:
    row = conn.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memory WHERE conversation_id = ? AND status = 'completed' "
        "ORDER BY end_sequence DESC, memory_id DESC LIMIT 1",
        (cid,),
    ).fetchone()
    return dict(row) if row else None


def memory_rows(
    conn: sqlite3.Connection, cid: str, status: str | None = None
) -> list[dict[str, Any]]:
    """Summary rows of a conversation (optionally one status), oldest first."""
    sql = f"SELECT {MEMORY_COLUMNS} FROM memory WHERE conversation_id = ?"
    args: tuple[Any, ...] = (cid,)
    if status is not None:
        sql += " AND status = ?"
        args += (status,)
    return [dict(r) for r in conn.execute(sql + " ORDER BY memory_id", args).fetchall()]


def insert_processing(
    conn: sqlite3.Connection, cid: str, start: int, end: int, base_id: int | None, now: float
) -> int:
    cur = conn.execute(
        "INSERT INTO memory (conversation_id, start_sequence, end_sequence, base_memory_id, "
        "status, created_at) VALUES (?, ?, ?, ?, 'processing', ?)",
        (cid, start, end, base_id, now),
    )
    return inserted_id(cur)


def finish(
    conn: sqlite3.Connection,
    memory_id: int,
    status: str,
    text: str = "",
    generation_time_ms: int | None = None,
) -> bool:
    """Move a processing row to its final status; False if it is no longer processing.

    A row already marked failed (stale) or stale (invalidated by a delete) must stay so, even
    when its late summary thread finishes.
    """
    cur = conn.execute(
        "UPDATE memory SET status = ?, memory_text = ?, generation_time_ms = ? "
        "WHERE memory_id = ? AND status = 'processing'",
        (status, text, generation_time_ms, memory_id),
    )
    return cur.rowcount == 1


def invalidate_covering(conn: sqlite3.Connection, cid: str, seqs: list[int]) -> list[int]:
    """Mark stale (and blank) every summary covering one of seqs, and every summary built on one.

    Descendants go too: an incremental summary may carry text from its base, so a deleted doc
    could otherwise come back through a later version of the chain.
    """
    hit: set[int] = set()
    for seq in seqs:
        rows = conn.execute(
            "SELECT memory_id FROM memory WHERE conversation_id = ? AND start_sequence <= ? "
            "AND end_sequence >= ? AND status != 'stale'",
            (cid, seq, seq),
        ).fetchall()
        hit.update(r[0] for r in rows)
    frontier = set(hit)
    while frontier:
        marks = ",".join("?" * len(frontier))
        rows = conn.execute(
            f"SELECT memory_id FROM memory WHERE base_memory_id IN ({marks}) AND status != 'stale'",
            tuple(frontier),
        ).fetchall()
        frontier = {r[0] for r in rows} - hit
        hit |= frontier
    for memory_id in hit:
        conn.execute(
            "UPDATE memory SET status = 'stale', memory_text = '' WHERE memory_id = ?",
            (memory_id,),
        )
    return sorted(hit)


def add_doc(conn: sqlite3.Connection, cid: str, doc: str, now: float) -> bool:
    """Add a project doc as the next message of cid; False when the exact doc is already there."""
    key = doc_hash(doc)
    if conn.execute("SELECT 1 FROM docs WHERE doc_hash = ?", (key,)).fetchone():
        return False
    (seq,) = append_messages(conn, cid, [("doc", doc)], now)
    conn.execute("INSERT INTO docs (doc_hash, seq) VALUES (?, ?)", (key, seq))
    return True


def has_doc(conn: sqlite3.Connection, doc: str) -> bool:
    """Whether the exact doc is a project doc (its hash's key, no listing)."""
    return conn.execute("SELECT 1 FROM docs WHERE doc_hash = ?", (doc_hash(doc),)).fetchone() is not None


def docs_with_hash_prefix(conn: sqlite3.Connection, cid: str, prefix: str) -> list[str]:
    """The project docs whose hash (their id) starts with `prefix`, oldest first: a range of
    the docs' key joined to their messages, not a listing."""
    low, high = hash_range(prefix)
    rows = conn.execute(
        "SELECT d.doc_hash, m.text FROM docs d JOIN messages m ON m.conversation_id = ? "
        "AND m.seq = d.seq WHERE d.doc_hash >= ? AND d.doc_hash <= ? ORDER BY m.seq",
        (cid, low, high)).fetchall()
    return [r[1] for r in rows if str(r[0]).startswith(prefix)]


def remove_doc(conn: sqlite3.Connection, cid: str, doc: str) -> int | None:
    """Remove a project doc by exact text; return its seq, or None when it was not there."""
    key = doc_hash(doc)
    row = conn.execute("SELECT seq FROM docs WHERE doc_hash = ?", (key,)).fetchone()
    if row is None:
        return None
    conn.execute("DELETE FROM docs WHERE doc_hash = ?", (key,))
    conn.execute("DELETE FROM messages WHERE conversation_id = ? AND seq = ?", (cid, row[0]))
    return int(row[0])


def add_doc_at(conn: sqlite3.Connection, cid: str, doc: str, when: float) -> bool:
    """Add a project doc at its own time `when` (an edit, an undo, a reindex keep a doc's
    time): appended, then moved into time order when an existing doc is newer (see
    renumber_by_time). False when the exact doc is already there."""
    if not add_doc(conn, cid, doc, when):
        return False
    newer = conn.execute("SELECT 1 FROM messages WHERE conversation_id = ? AND created_at > ? "
                         "LIMIT 1", (cid, when)).fetchone()
    if newer:
        renumber_by_time(conn, cid)
    return True


def renumber_by_time(conn: sqlite3.Connection, cid: str) -> list[int]:
    """Give cid's messages sequence numbers in their time order (ties: their old order), and
    mark stale every summary of it (a summary covers a range of sequence numbers, which now
    name other docs); returns the summaries made stale. Two passes through numbers above every
    old one, so no two rows ever share a key (PostgreSQL checks a key per row)."""
    rows = conn.execute("SELECT seq FROM messages WHERE conversation_id = ? "
                        "ORDER BY created_at, seq", (cid,)).fetchall()
    order = [int(r[0]) for r in rows]
    if order == sorted(order):
        return []
    (top,) = conn.execute("SELECT next_seq FROM conversations WHERE conversation_id = ?",
                          (cid,)).fetchone()
    shift = max(int(top), max(order) + 1)
    conn.execute("UPDATE messages SET seq = seq + ? WHERE conversation_id = ?", (shift, cid))
    conn.execute("UPDATE docs SET seq = seq + ?", (shift,))
    for new, old in enumerate(order):
        conn.execute("UPDATE messages SET seq = ? WHERE conversation_id = ? AND seq = ?",
                     (new, cid, old + shift))
        conn.execute("UPDATE docs SET seq = ? WHERE seq = ?", (new, old + shift))
    conn.execute("UPDATE conversations SET next_seq = ? WHERE conversation_id = ?",
                 (len(order), cid))
    return invalidate_all(conn, cid)


def invalidate_all(conn: sqlite3.Connection, cid: str) -> list[int]:
    """Mark stale (and blank) every summary of cid that is not stale yet; returns their ids."""
    ids = [int(r[0]) for r in conn.execute(
        "SELECT memory_id FROM memory WHERE conversation_id = ? AND status != 'stale'", (cid,))]
    conn.execute("UPDATE memory SET status = 'stale', memory_text = '' WHERE conversation_id = ? "
                 "AND status != 'stale'", (cid,))
    return ids


def doc_time(conn: sqlite3.Connection, cid: str, doc: str) -> float | None:
    """A project doc's time (its message's), found by the doc's hash key, or None."""
    row = conn.execute("SELECT m.text, m.created_at FROM docs d JOIN messages m ON m.seq = d.seq"
                       " AND m.conversation_id = ? WHERE d.doc_hash = ?", (cid, doc_hash(doc))).fetchone()
    return float(row[1]) if row is not None and row[0] == doc else None


def records(conn: sqlite3.Connection, cid: str) -> list[tuple[str, float]]:
    """cid's messages as (text, time), in order."""
    return [(r[0], float(r[1])) for r in conn.execute(
        "SELECT text, created_at FROM messages WHERE conversation_id = ? ORDER BY seq", (cid,))]


def rekey(conn: Any, cid: str, seqs: list[int]) -> list[int]:
    """Project docs another program wrote (the messages at `seqs`: added, rewritten or
    deleted) made whole again: their keys from their text now (a text already stored is kept
    once: the later message goes), the summaries that cover them or were built on those made
    stale, the next seq past every message, and the messages in time order. Returns the
    summaries made stale."""
    for start in range(0, len(seqs), 500):
        chunk = seqs[start:start + 500]
        conn.execute(f"DELETE FROM docs WHERE seq IN ({','.join('?' * len(chunk))})", chunk)
    stale = invalidate_covering(conn, cid, seqs)
    for seq in seqs:
        row = conn.execute("SELECT text FROM messages WHERE conversation_id = ? AND seq = ?",
                           (cid, seq)).fetchone()
        if row is None:
            continue
        key = doc_hash(row[0])
        if conn.execute("SELECT 1 FROM docs WHERE doc_hash = ?", (key,)).fetchone():
            conn.execute("DELETE FROM messages WHERE conversation_id = ? AND seq = ?", (cid, seq))
        else:
            conn.execute("INSERT INTO docs (doc_hash, seq) VALUES (?, ?)", (key, seq))
    conn.execute("INSERT INTO conversations (conversation_id) VALUES (?) ON CONFLICT DO NOTHING", (cid,))
    conn.execute("UPDATE conversations SET next_seq = (SELECT COALESCE(MAX(seq), -1) + 1 FROM messages "
                 "WHERE conversation_id = ?) WHERE conversation_id = ? AND next_seq <= (SELECT "
                 "COALESCE(MAX(seq), -1) FROM messages WHERE conversation_id = ?)", (cid, cid, cid))
    return sorted(set(stale) | set(renumber_by_time(conn, cid)))
