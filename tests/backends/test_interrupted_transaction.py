"""Ctrl-C raises between any two bytecodes, so it can land after a store's BEGIN and before the
handler that would end the transaction. Such a leftover once made every later transaction on
that connection fail ("cannot start a transaction within a transaction"): CI saw an interrupted
`middle memory import git` warn that it could not save its vector snapshot on the way out. Every
SQLite store now rolls the leftover back at its next transaction: what it wrote is not kept,
everything committed before is, and the store reads, writes and closes as usual."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Callable

import pytest

from backends.hindsight.bank import Bank
from backends.hipporag.store import GraphStore
from backends.retrieval.store import RetrievalStore
from backends.sliding_window.store import Store as WindowStore

STORES: dict[str, Callable[[Path], Any]] = {
    "retrieval": lambda d: RetrievalStore(d / "hybrid.sqlite3", use_vectors=True),
    "sliding_window": lambda d: WindowStore(d / "window.sqlite3"),
    "hipporag": lambda d: GraphStore(d / "graph.sqlite3"),
    "hindsight": lambda d: Bank(d),
}


def meta_value(store: Any, key: str) -> str | None:
    with store.read() as conn:
        return store.meta(conn, key)


@pytest.mark.parametrize("kind", sorted(STORES))
def test_a_transaction_an_interrupt_left_open_is_rolled_back_by_the_next(kind, tmp_path):
    store = STORES[kind](tmp_path)
    try:
        with store.write() as conn:
            store.set_meta(conn, "kept", "committed before the interrupt")
        conn = store.require_open()
        conn.execute("BEGIN IMMEDIATE")  # what an interrupt right after a write's BEGIN leaves
        store.set_meta(conn, "lost", "written by the interrupted transaction")
        assert conn.in_transaction

        assert meta_value(store, "lost") is None  # a read begins: the leftover is rolled back
        assert meta_value(store, "kept") == "committed before the interrupt"
        conn.execute("BEGIN")  # a read's leftover, then a write
        with store.write() as conn:
            store.set_meta(conn, "after", "written after")
        assert meta_value(store, "after") == "written after"
        other = sqlite3.connect(store.path, timeout=0.5)  # another process is not locked out
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
        finally:
            other.close()
    finally:
        store.close()


def test_the_embedding_cache_writes_again_after_an_interrupted_write(tmp_path):
    import numpy as np

    from backends.retrieval.cache import EmbeddingCache

    cache = EmbeddingCache(tmp_path / "cache.sqlite3")
    try:
        conn = cache._conn
        assert conn is not None
        conn.execute("BEGIN")  # an interrupt between a put's BEGIN and its COMMIT
        conn.execute("INSERT INTO vectors VALUES ('m', x'00', x'00000000')")
        vec = np.ones(4, dtype=np.float32)
        cache.put("m", [(b"\x01", vec)])
        assert set(cache.get("m", [b"\x00", b"\x01"], 4)) == {b"\x01"}  # the cut write is not kept
        assert not conn.in_transaction
    finally:
        cache.close()
