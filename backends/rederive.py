"""Rebuilding, where the store is, what a backend derives from its docs (hipporag's graph,
hindsight's facts and observations, sliding_window's summaries): their own writes keep those,
so a doc another program wrote (psql, the sqlite3 shell) has none until they are made again.

`middle memory reindex --from BACKEND` on a store in PostgreSQL (where a store cannot be
rebuilt as a new file beside the old one) calls `rebuild_in_place`: in ONE write transaction
of the store, the docs' keys are made to match their text again (a hand-written row may carry
none, or an old one), every doc is deleted through the backend (its derived rows with it) and
added again at its own time, and the store's note of other programs' writes is cleared. A
failure rolls all of it back: no doc is lost, and the store is as it was. Other processes
follow through the store's change log, as after any write."""

from __future__ import annotations

from typing import Any

from backends.storage import OUTSIDE_WRITES, Store
from orchestrator.plugin_api import MemoryRecord


class RebuildsInPlace:
    """For a backend whose derived structures only its own writes keep (see the module)."""

    def _rebuilt_store(self) -> Store:
        """The store whose write transaction the rebuild is done in."""
        raise NotImplementedError

    def _repair_keys(self, conn: Any) -> None:
        """Make each doc's key (the hash its lookups and deletes go by) match its text."""
        raise NotImplementedError

    def _drop_leftovers(self, conn: Any) -> None:
        """Remove the doc rows the deletes left: a second row of one text, written so by hand
        (its key could not be its text's)."""
        raise NotImplementedError

    def rebuild_in_place(self) -> int:
        """Delete every doc and add it again at its time, in one transaction; how many docs."""
        backend: Any = self
        store = self._rebuilt_store()
        with store.write() as conn:  # every read and write below joins this transaction
            self._repair_keys(conn)
            records: dict[str, float | None] = {}
            for text, when in backend.list_records():
                records.setdefault(text, when)  # a text twice (written so by hand): kept once
            backend.delete(list(records))
            self._drop_leftovers(conn)
            backend.index_records([MemoryRecord(text, timestamp=when) for text, when in records.items()])
            conn.execute("DELETE FROM meta WHERE key = ?", (OUTSIDE_WRITES,))
        return len(records)


def repair_hashes(conn: Any, table: str, hash_column: str, hash_text: Any) -> None:
    """Set the hash of each row of a table of whole docs (`id`, `text`) whose hash is not
    its text's; a second row of the same text gets a key of its own, so a unique key holds
    (the rebuild then drops that row: `_drop_leftovers`). Identifiers: the callers' constants."""
    seen: set[str] = set()
    for row_id, text, held in conn.execute(f"SELECT id, text, {hash_column} FROM {table} ORDER BY id").fetchall():
        key = hash_text(text)
        if key in seen:
            key = f"duplicate:{row_id}"
        seen.add(key)
        if held != key:
            conn.execute(f"UPDATE {table} SET {hash_column} = ? WHERE id = ?", (key, row_id))


class DocumentTableRebuild(RebuildsInPlace):
    """rebuild_in_place for a backend whose docs are one table of whole docs (its
    `_doc_table`: hipporag's passages, hindsight's documents)."""

    _doc_table: Any

    def _repair_keys(self, conn: Any) -> None:
        table = self._doc_table
        repair_hashes(conn, table.table, table.hash_column, table.hash_text)

    def _drop_leftovers(self, conn: Any) -> None:
        conn.execute(f"DELETE FROM {self._doc_table.table}")


class CatchesUp:
    """For a backend whose derived structures only its own writes keep, and whose store logs
    the doc rows any program writes (storage.CountedWrites.key): before each call that reads
    or writes them, the docs another program added, rewrote or deleted since (the sqlite3
    shell, psql, a script) are caught up, each alone: its derived rows removed and, when its
    row is still there, the doc added again at its own time, in one write transaction of the
    store. How it knows what changed: the store's triggers log the key of every row written,
    middle's own writes delete their entries before they commit, so what is left is exactly
    the rows others wrote; a call with nothing to catch up costs one indexed read."""

    def _rebuilt_store(self) -> Store:
        raise NotImplementedError

    def _rederive(self, conn: Any, keys: list[int]) -> None:
        """Inside the store's write: make the derived structures of the doc rows `keys` match
        what those rows hold now (a key whose row is gone: its derived rows removed)."""
        raise NotImplementedError

    def catch_up(self) -> None:  # MemoryBackend.catch_up: the facade's call before each one
        self._catch_up()

    def _catch_up(self) -> None:
        store = self._rebuilt_store()
        if not store.logs_outside:
            return
        with store.lock:
            if store._current is not None:  # inside this thread's own transaction: caught up at its start
                return
            with store.read() as conn:
                if not store.outside_pending(conn):
                    return
            with store.write() as conn:
                keys = store.take_outside(conn)
                if keys:
                    self._rederive(conn, keys)
                # the note of other programs' writes (storage.warn_outside_writes): caught up now
                conn.execute("DELETE FROM meta WHERE key = ?", (OUTSIDE_WRITES,))
