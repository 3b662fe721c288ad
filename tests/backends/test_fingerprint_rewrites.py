"""A doc rewritten in place by another program moves the store's fingerprint (issue 38): an
`UPDATE ... SET text = ...` keeps the count of docs and the newest id, so each built-in store
counts the writes of its docs' text and time by triggers in the store (storage.CountedWrites;
a row per write in PostgreSQL, retrieval_doc_writes for the retrieval stores), on SQLite and on
PostgreSQL. A recall, which writes access counts, does not move it; a store written before the
counter gets it in place when opened, while another connection has it open."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from backends.bm25.backend import Bm25Backend
from backends.hindsight import HindsightBackend
from backends.hipporag import HippoRAGBackend
from backends.sliding_window.backend import SlidingWindowBackend
from orchestrator.plugin_api import MemoryBackend, MemoryDatabase

DOCS = ["Deploys run on Tuesday after the freeze.", "Exports write CSV with a header row."]
OLD, NEW = DOCS[0], "Deploys run on Thursday after the freeze."

# (backend, options, the docs' table, its text column, a condition every doc row holds)
STORES: dict[str, tuple[type[MemoryBackend], dict[str, Any], str, str]] = {
    "bm25": (Bm25Backend, {}, "docs", "TRUE"),
    "hipporag": (HippoRAGBackend, {"embedder": "hashing"}, "passages", "TRUE"),
    "hindsight": (HindsightBackend, {"embedder": "hashing"}, "documents", "TRUE"),
    "sliding_window": (SlidingWindowBackend, {"background": False}, "messages",
                       "conversation_id = ':project:'"),
}

# Another program (no middle-agent code): rewrites one doc's text in place and nothing else.
_SQLITE_TOOL = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
with conn:
    done = conn.execute(f"UPDATE {sys.argv[2]} SET text = ? WHERE text = ? AND {sys.argv[3]}",
                        (sys.argv[5], sys.argv[4])).rowcount
assert done == 1, done
"""
_PG_TOOL = """
import psycopg, sys
with psycopg.connect(sys.argv[1]) as conn:
    done = conn.execute(f"UPDATE {sys.argv[2]} SET text = %s WHERE text = %s AND {sys.argv[3]}",
                        (sys.argv[5], sys.argv[4])).rowcount
assert done == 1, done
"""


def _run(*args: str) -> None:
    done = subprocess.run([sys.executable, "-c", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def _open(name: str, where: Path, database: MemoryDatabase | None = None) -> MemoryBackend:
    cls, options, _, _ = STORES[name]
    extra = {"database": database} if database is not None else {}
    return cls(where, cls.Options(**options), **extra)  # type: ignore[call-arg, arg-type]


def _sqlite_rewrite(name: str, where: Path) -> Callable[[], None]:
    cls, _, table, only = STORES[name]
    return lambda: _run(_SQLITE_TOOL, str(where / cls.store_files[0]), table, only, OLD, NEW)


def _pg_table(backend: MemoryBackend, name: str) -> tuple[str, str]:
    """The table a tool rewrites on PostgreSQL, and the condition that keeps it to this store."""
    _, _, table, only = STORES[name]
    store: Any = getattr(backend, "_store", None) or backend.bank  # type: ignore[attr-defined]
    if name == "bm25":  # the retrieval backends share retrieval_docs, one store_id each
        return "retrieval_docs", f"store_id = {int(store.store_id)}"
    return f"{store.schema}.{table}", only


def _rewritten_in_place_is_seen(backend: MemoryBackend, rewrite: Callable[[], None]) -> None:
    backend.index(DOCS)
    before = backend.fingerprint()
    assert before is not None
    backend.retrieve(["deploys"], 2)  # access counts written: not a change of the docs
    assert backend.fingerprint() == before, "a recall moved the fingerprint"
    rewrite()
    after = backend.fingerprint()
    assert after != before, "a doc rewritten in place left the fingerprint as it was"
    assert NEW in backend.list_docs() and OLD not in backend.list_docs()
    backend.retrieve(["deploys"], 2)  # a retrieval store catches up on the rewrite: its hash (a write)
    settled = backend.fingerprint()
    backend.retrieve(["deploys"], 2)
    assert backend.fingerprint() == settled, "a recall moved the fingerprint"


@pytest.mark.parametrize("name", list(STORES))
def test_a_doc_rewritten_in_place_moves_the_fingerprint_on_sqlite(tmp_path, name):
    backend = _open(name, tmp_path)
    try:
        _rewritten_in_place_is_seen(backend, _sqlite_rewrite(name, tmp_path))
    finally:
        backend.close()


@pytest.mark.postgres
@pytest.mark.parametrize("name", list(STORES))
def test_a_doc_rewritten_in_place_moves_the_fingerprint_on_postgresql(tmp_path, pg_url, name):
    backend = _open(name, tmp_path, MemoryDatabase(pg_url, "p"))
    try:
        table, only = _pg_table(backend, name)
        _rewritten_in_place_is_seen(backend, lambda: _run(_PG_TOOL, pg_url, table, only, OLD, NEW))
    finally:
        backend.close()


def test_a_store_from_before_the_counter_gets_it_while_another_connection_has_it_open(tmp_path):
    """A bm25 store file as an older middle-agent left it (no counter, no triggers), open in
    another connection (an older middle-agent's process): opening it here lays the counter in
    place; that connection's next write works and is counted."""
    backend = _open("bm25", tmp_path)
    backend.index(DOCS)
    backend.close()
    path = tmp_path / "bm25.sqlite3"
    older = sqlite3.connect(path, isolation_level=None)
    try:
        for event in ("inserted", "updated", "deleted"):
            older.execute(f"DROP TRIGGER docs_{event}_counted")
        older.execute("DROP TABLE doc_writes")
        assert older.execute("SELECT COUNT(*) FROM docs").fetchone()[0] == 2  # read before
        backend = _open("bm25", tmp_path)  # lays the counter and its triggers in place
        try:
            before = backend.fingerprint()
            assert older.execute("UPDATE docs SET text = ? WHERE text = ?", (NEW, OLD)).rowcount == 1
            assert backend.fingerprint() != before
            assert NEW in backend.list_docs()
            backend.index(["A third doc, indexed after the upgrade."])
            assert len(backend.list_docs()) == 3
        finally:
            backend.close()
    finally:
        older.close()


@pytest.mark.postgres
def test_a_database_from_before_the_counter_gets_it_in_place(tmp_path, pg_url):
    """The shared retrieval tables at schema version 2 (no retrieval_doc_writes, no trigger) are brought
    to version 3 by the next process that opens them; their docs are kept."""
    import psycopg

    from backends import pg_database

    database = MemoryDatabase(pg_url, "p")
    backend = _open("bm25", tmp_path, database)
    backend.index(DOCS)
    backend.close()  # the last user: the next open checks the schema again
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER retrieval_docs_writes_counted ON retrieval_docs")
        conn.execute("DROP FUNCTION retrieval_count_doc_writes()")
        conn.execute("DROP TABLE retrieval_doc_writes")
        conn.execute("UPDATE retrieval_schema SET version = 2")
    backend = _open("bm25", tmp_path, database)
    try:
        assert backend.list_docs() == DOCS
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT version FROM retrieval_schema").fetchone()[0] == pg_database.SCHEMA_VERSION
        table, only = _pg_table(backend, "bm25")
        _rewritten_in_place_is_seen_after_index(backend, lambda: _run(_PG_TOOL, pg_url, table, only, OLD, NEW))
    finally:
        backend.close()


def _rewritten_in_place_is_seen_after_index(backend: MemoryBackend, rewrite: Callable[[], None]) -> None:
    before = backend.fingerprint()
    rewrite()
    assert backend.fingerprint() != before
    assert NEW in backend.list_docs()


@pytest.mark.postgres
def test_a_store_schema_from_before_the_counter_gets_it_in_place(tmp_path, pg_url):
    """A sliding_window store in PostgreSQL (a schema of its own) as an older middle-agent
    left it, no counter, no trigger: the next open lays them, its docs kept; a reopen finds
    them there."""
    import psycopg

    database = MemoryDatabase(pg_url, "p")
    backend = _open("sliding_window", tmp_path, database)
    backend.index(DOCS)
    table, only = _pg_table(backend, "sliding_window")
    schema = table.split(".")[0]
    backend.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP TRIGGER messages_writes_counted ON {table}")
        conn.execute(f"DROP FUNCTION {schema}.count_messages_writes()")
        conn.execute(f"DROP TABLE {schema}.doc_writes")
    for was, now in ((OLD, NEW), (NEW, OLD)):  # laid in place, then found there
        backend = _open("sliding_window", tmp_path, database)
        try:
            assert was in backend.list_docs() and len(backend.list_docs()) == len(DOCS)
            before = backend.fingerprint()
            _run(_PG_TOOL, pg_url, table, only, was, now)
            assert backend.fingerprint() != before
        finally:
            backend.close()


@pytest.mark.postgres
@pytest.mark.parametrize("name", ["bm25", "sliding_window"])
def test_postgresql_keeps_only_the_newest_counted_write(tmp_path, pg_url, name):
    """A row per write in PostgreSQL (no row lock shared by writers), cut to the newest by
    middle's own writes: the table stays one row per store, and the fingerprint still moves."""
    import psycopg

    backend = _open(name, tmp_path, MemoryDatabase(pg_url, "p"))
    try:
        table, where = ("retrieval_doc_writes", f"store_id = {int(backend._store.store_id)}") \
            if name == "bm25" else (f"{_pg_table(backend, name)[0].split('.')[0]}.doc_writes", "TRUE")
        seen = set()
        for n in range(5):
            backend.index([f"Doc {n}: one of a few.", f"Doc {n}: another of a few."])
            seen.add(backend.fingerprint())
            backend.index([f"Doc {n}: a third."])  # a write of middle's: the rows before it are cut
            with psycopg.connect(pg_url) as conn:
                assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}").fetchone()[0] == 1
        assert len(seen) == 5
    finally:
        backend.close()
