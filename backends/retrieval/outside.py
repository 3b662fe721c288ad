"""Docs written by another program (the sqlite3 shell, a script, a DB browser): their search rows
and vectors brought up to date instead of left stale.

A retrieval store's keyword index (FTS5, `content='docs'`) and its vectors are derived from a
doc's text by middle's Python (code terms, chunked embeddings), which another program cannot run.
So the store keeps a log, by triggers in the store itself: every insert of a doc, rewrite of its
text and delete, with the text the doc had before (what the keyword index holds for it). Each of
middle's own writes keeps the index itself and clears its rows from the log in the same
transaction; what is left in the log was written by someone else. Before any search or write,
middle reads the log (one indexed read when it is empty) and, for each doc in it, deletes the
keyword row of the text the index held (an external-content FTS5 row is deleted by the exact text
it was added with: the log's first entry for the doc), adds one for its text now, sets its hash,
drops its old vectors and queues it for new ones (`needs_vectors`), which the backend makes
before its next search.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

LOG = "outside_writes"
NEEDS_VECTORS = "needs_vectors"

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {LOG} (seq INTEGER PRIMARY KEY AUTOINCREMENT, id INTEGER NOT NULL, old_text TEXT);
CREATE TABLE IF NOT EXISTS {NEEDS_VECTORS} (id INTEGER PRIMARY KEY);
"""

# Laid on every open (IF NOT EXISTS), each whole: a trigger's body holds a ';'.
TRIGGERS = (
    f"CREATE TRIGGER IF NOT EXISTS docs_logged_insert AFTER INSERT ON docs FOR EACH ROW "
    f"BEGIN INSERT INTO {LOG} (id, old_text) VALUES (NEW.id, NULL); END",
    f"CREATE TRIGGER IF NOT EXISTS docs_logged_rewrite AFTER UPDATE OF text ON docs FOR EACH ROW "
    f"WHEN OLD.text IS NOT NEW.text BEGIN INSERT INTO {LOG} (id, old_text) VALUES (OLD.id, OLD.text); END",
    f"CREATE TRIGGER IF NOT EXISTS docs_logged_delete AFTER DELETE ON docs FOR EACH ROW "
    f"BEGIN INSERT INTO {LOG} (id, old_text) VALUES (OLD.id, OLD.text); END",
)


class CatchUp:
    """What both retrieval stores share: `catch_up()` before a read of the derived index, at most
    once per search (`with store.caught_up():` around it: the reads inside skip their own check,
    which on PostgreSQL is a round trip each). A store gives `_pending()` (one indexed read) and a
    `write()` that catches up first."""

    def _scope(self) -> threading.local:
        scope = self.__dict__.get("_catch_up_scope")
        if scope is None:
            scope = self.__dict__.setdefault("_catch_up_scope", threading.local())
        return scope

    @contextmanager
    def caught_up(self) -> Iterator[None]:
        scope = self._scope()
        if getattr(scope, "on", False):
            yield
            return
        scope.vectors = self._look()
        scope.on = True
        try:
            yield
        finally:
            scope.on = False

    def catch_up(self) -> None:
        """Bring the index up to the docs other programs wrote (one indexed read when none did)."""
        if not getattr(self._scope(), "on", False):
            self._look()

    def vectors_wanted(self) -> bool:
        """Whether docs wait for new vectors (rewritten by another program): inside `caught_up()`
        as its one read found it, so a search does not read it again."""
        scope = self._scope()
        return bool(scope.vectors) if getattr(scope, "on", False) else self._look()

    def _look(self) -> bool:
        """Catch up if the log holds anything; whether docs then wait for new vectors."""
        logged, waiting = self._pending()
        if logged:
            with self.write():  # type: ignore[attr-defined]
                pass  # write() catches up
        return waiting or (logged and bool(getattr(self, "use_vectors", False)))

    def _pending(self) -> tuple[bool, bool]:
        """(the log holds writes of others, docs wait for vectors), in one indexed read."""
        raise NotImplementedError


def pending(conn: sqlite3.Connection) -> bool:
    """Whether another program wrote docs since middle last caught up."""
    return conn.execute(f"SELECT 1 FROM {LOG} LIMIT 1").fetchone() is not None


def pending_and_waiting(conn: sqlite3.Connection) -> tuple[bool, bool]:
    """(another program wrote docs since middle last caught up, docs wait for new vectors)."""
    logged, waiting = conn.execute(
        f"SELECT EXISTS (SELECT 1 FROM {LOG}), EXISTS (SELECT 1 FROM {NEEDS_VECTORS})").fetchone()
    return bool(logged), bool(waiting)


def forget_own(conn: sqlite3.Connection, doc_id: int) -> None:
    """Middle's own write of `doc_id` (which kept the index itself): not someone else's."""
    conn.execute(f"DELETE FROM {LOG} WHERE id = ?", (doc_id,))


def catch_up(conn: sqlite3.Connection, fts_text: Callable[[str], str], doc_hash: Callable[[str], str],
             drop_vectors: Callable[[Any, int], None], use_vectors: bool) -> list[int]:
    """Inside a write: bring the index up to the docs others wrote; the ids touched (for the
    change log). A doc rewritten to the text of another doc is removed: the store keeps each
    text once."""
    held: dict[int, str | None] = {}  # per doc, the text its index row was added with (None: none)
    for doc_id, old_text in conn.execute(f"SELECT id, old_text FROM {LOG} ORDER BY seq").fetchall():
        held.setdefault(int(doc_id), old_text)
    for doc_id, old_text in held.items():
        if old_text is not None:
            conn.execute("INSERT INTO fts (fts, rowid, text) VALUES ('delete', ?, ?)",
                         (doc_id, fts_text(old_text)))
        drop_vectors(conn, doc_id)
        row = conn.execute("SELECT text FROM docs WHERE id = ?", (doc_id,)).fetchone()
        if row is None:
            conn.execute(f"DELETE FROM {NEEDS_VECTORS} WHERE id = ?", (doc_id,))
            continue
        text = str(row[0])
        twin = conn.execute("SELECT id FROM docs WHERE hash = ? AND id != ?", (doc_hash(text), doc_id)).fetchone()
        if twin is not None:
            conn.execute("DELETE FROM docs WHERE id = ?", (doc_id,))
            conn.execute(f"DELETE FROM {NEEDS_VECTORS} WHERE id = ?", (doc_id,))
            continue
        new_hash = doc_hash(text)
        conn.execute("UPDATE docs SET hash = ? WHERE id = ? AND hash IS NOT ?", (new_hash, doc_id, new_hash))
        conn.execute("INSERT INTO fts (rowid, text) VALUES (?, ?)", (doc_id, fts_text(text)))
        if use_vectors:
            conn.execute(f"INSERT OR IGNORE INTO {NEEDS_VECTORS} (id) VALUES (?)", (doc_id,))
    conn.execute(f"DELETE FROM {LOG}")  # the rows of this catch-up's own deletes too: handled above
    return list(held)


def wanting_vectors(conn: sqlite3.Connection) -> dict[int, str]:
    """The docs whose vectors are to be made again (rewritten by another program), by id."""
    return {int(i): str(t) for i, t in conn.execute(
        f"SELECT d.id, d.text FROM {NEEDS_VECTORS} n JOIN docs d ON d.id = n.id")}


def vectors_made(conn: sqlite3.Connection, doc_id: int) -> None:
    conn.execute(f"DELETE FROM {NEEDS_VECTORS} WHERE id = ?", (doc_id,))
