"""Docs written to a retrieval store by another program (the sqlite3 shell, a script) are searched
by what they say now (backends/retrieval/outside.py): a rewrite's new words find it and its old
words do not, a deleted doc is not found and an inserted one is, vectors are made again for the
new text, and middle's own writes afterwards keep the keyword index whole (FTS5's integrity
check). Each program here is plain Python's sqlite3, in a process of its own, no middle code."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from backends.bm25.backend import Bm25Backend
from backends.dense.backend import DenseBackend
from backends.hybrid.backend import HybridBackend
from backends.retrieval import FORMAT_VERSION
from orchestrator.plugin_api import MemoryBackend

DOCS = ["Deploys run on Tuesday after the release freeze.", "Exports write CSV files with a header row.",
        "The cache is cleared nightly by cron."]
NEW = "Invoices are emailed to billing contacts every month."

# Another program: one SQL statement with its parameters, on the store's file.
_TOOL = """
import sqlite3, sys, json
conn = sqlite3.connect(sys.argv[1])
with conn:
    done = conn.execute(sys.argv[2], json.loads(sys.argv[3])).rowcount
assert done == 1, done
"""


def _tool(path: Path, sql: str, *params: Any) -> None:
    import json

    done = subprocess.run([sys.executable, "-c", _TOOL, str(path), sql, json.dumps(params)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


BACKENDS = {
    "bm25": lambda d: Bm25Backend(d),
    "dense": lambda d: DenseBackend(d, DenseBackend.Options(embedder="hashing")),
    "hybrid": lambda d: HybridBackend(d, HybridBackend.Options(embedder="hashing")),
}


def _store(backend: MemoryBackend) -> Path:
    return backend.store_dir / type(backend).store_files[0]


def _found(backend: MemoryBackend, query: str, k: int = 1) -> list[str]:
    return backend.retrieve([query], k)[0]["docs"]


def _fts_whole(path: Path) -> None:
    """FTS5's own check of an external-content index against the docs it was built from."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("INSERT INTO fts (fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()


@pytest.mark.parametrize("name", list(BACKENDS))
def test_a_doc_rewritten_by_another_program_is_found_by_its_new_words(name, tmp_path):
    backend = BACKENDS[name](tmp_path)
    try:
        backend.index(DOCS)
        assert _found(backend, "deploys Tuesday release freeze") == [DOCS[0]]
        _tool(_store(backend), "UPDATE docs SET text = ? WHERE text = ?", NEW, DOCS[0])
        assert _found(backend, "invoices emailed billing contacts") == [NEW]
        assert DOCS[0] not in _found(backend, "deploys Tuesday release freeze", k=3)
        assert backend.has_doc(NEW) and not backend.has_doc(DOCS[0])  # its hash follows its text
        _fts_whole(_store(backend))
        # middle's own writes on the rewritten doc keep the index whole
        assert backend.delete([NEW]) == 1
        backend.index([DOCS[0]])
        _fts_whole(_store(backend))
        assert _found(backend, "deploys Tuesday release freeze") == [DOCS[0]]
    finally:
        backend.close()


@pytest.mark.parametrize("name", ["dense", "hybrid"])
def test_a_rewritten_doc_gets_vectors_of_its_new_text(name, tmp_path):
    backend = BACKENDS[name](tmp_path)
    try:
        backend.index(DOCS)
        before = backend._store.vectors([1])[1]  # type: ignore[attr-defined]
        _tool(_store(backend), "UPDATE docs SET text = ? WHERE text = ?", NEW, DOCS[0])
        backend.retrieve(["anything"], 1)
        after = backend._store.vectors([1])[1]  # type: ignore[attr-defined]
        assert not (before.shape == after.shape and (before == after).all())
        fresh = HybridBackend if name == "hybrid" else DenseBackend
        other = fresh(tmp_path / "other", fresh.Options(embedder="hashing"))
        try:
            other.index([NEW])
            assert (other._store.vectors([1])[1] == after).all()  # type: ignore[attr-defined]
        finally:
            other.close()
    finally:
        backend.close()


@pytest.mark.parametrize("name", list(BACKENDS))
def test_docs_deleted_and_inserted_by_another_program(name, tmp_path):
    backend = BACKENDS[name](tmp_path)
    try:
        backend.index(DOCS)
        _tool(_store(backend), "DELETE FROM docs WHERE text = ?", DOCS[1])
        _tool(_store(backend), "INSERT INTO docs (hash, text, created_at, doc_time) VALUES (?, ?, ?, ?)",
              "typed by hand", NEW, time.time(), time.time())
        assert DOCS[1] not in _found(backend, "exports CSV header row", k=3)
        assert _found(backend, "invoices emailed billing contacts") == [NEW]
        assert backend.has_doc(NEW)
        _fts_whole(_store(backend))
        backend.index([DOCS[1]])  # indexed again by middle: found once
        assert _found(backend, "exports CSV header row", k=3).count(DOCS[1]) == 1
        _fts_whole(_store(backend))
    finally:
        backend.close()


@pytest.mark.parametrize("name", list(BACKENDS))
def test_a_rewritten_doc_is_found_by_its_new_id_before_any_search(name, tmp_path):
    """`middle memory show ID` of the new text, and the facade's lookups by text, right after the
    rewrite: the id is the text's hash, which the catch-up sets."""
    import hashlib

    backend = BACKENDS[name](tmp_path)
    try:
        backend.index(DOCS)
        _tool(_store(backend), "UPDATE docs SET text = ? WHERE text = ?", NEW, DOCS[0])
        assert backend.docs_by_id(hashlib.sha256(NEW.encode()).hexdigest()[:8]) == [NEW]
        assert backend.has_doc(NEW) and backend.doc_time(NEW) is not None
        assert backend.doc_time(DOCS[0]) is None and not backend.has_doc(DOCS[0])
    finally:
        backend.close()


def test_a_rewrite_to_another_docs_text_keeps_one_copy(tmp_path):
    backend = Bm25Backend(tmp_path)
    try:
        backend.index(DOCS)
        _tool(_store(backend), "UPDATE docs SET text = ? WHERE text = ?", DOCS[2], DOCS[0])
        assert sorted(backend.list_docs()) == sorted(DOCS[1:])  # listed once, before any search
        assert _found(backend, "cache cleared nightly cron", k=3) == [DOCS[2]]
        _fts_whole(_store(backend))
    finally:
        backend.close()


def test_another_middle_process_sees_the_caught_up_index(tmp_path):
    """Two middles on one store: whichever catches up, both search the new text."""
    first, second = Bm25Backend(tmp_path), Bm25Backend(tmp_path)
    try:
        first.index(DOCS)
        _tool(_store(first), "UPDATE docs SET text = ? WHERE text = ?", NEW, DOCS[0])
        assert _found(first, "invoices emailed billing contacts") == [NEW]
        assert _found(second, "invoices emailed billing contacts") == [NEW]
        assert DOCS[0] not in _found(second, "deploys Tuesday release freeze", k=3)
        _fts_whole(_store(first))
    finally:
        first.close()
        second.close()


def test_a_version_2_store_is_raised_and_its_older_writes_are_not_taken_for_others(tmp_path):
    backend = Bm25Backend(tmp_path)
    backend.index(DOCS)
    backend.close()
    path = tmp_path / "bm25.sqlite3"
    conn = sqlite3.connect(path)
    with conn:  # as a store written before the log: no triggers, no log, version 2
        for trigger in ("docs_logged_insert", "docs_logged_rewrite", "docs_logged_delete"):
            conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute("DROP TABLE outside_writes")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'format_version'")
    conn.close()
    backend = Bm25Backend(tmp_path)
    try:
        conn = sqlite3.connect(path)
        assert conn.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()[0] == str(FORMAT_VERSION)
        assert conn.execute("SELECT COUNT(*) FROM outside_writes").fetchone()[0] == 0
        conn.close()
        assert _found(backend, "deploys Tuesday release freeze") == [DOCS[0]]
        _fts_whole(path)
    finally:
        backend.close()


# --- PostgreSQL: the same, with another program's psycopg connection ---------------------------

_PG_TOOL = """
import psycopg, sys, json
with psycopg.connect(sys.argv[1]) as conn:
    done = conn.execute(sys.argv[2], json.loads(sys.argv[3])).rowcount
assert done == 1, done
"""


def _pg_tool(url: str, sql: str, *params: Any) -> None:
    import json

    done = subprocess.run([sys.executable, "-c", _PG_TOOL, url, sql, json.dumps(params)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def _pg_backend(name: str, tmp_path: Path, url: str, project: str) -> Any:
    from orchestrator.plugin_api import MemoryDatabase

    database = MemoryDatabase(url, project)
    if name == "bm25":
        return Bm25Backend(tmp_path, Bm25Backend.Options(), database=database)
    if name == "dense":
        return DenseBackend(tmp_path, DenseBackend.Options(embedder="hashing"), database=database)
    return HybridBackend(tmp_path, HybridBackend.Options(embedder="hashing"), database=database)


def _pg_totals_right(url: str, store_id: int) -> None:
    """The store's totals BM25 reads (docs, their summed lengths) are the docs' own."""
    import psycopg

    with psycopg.connect(url) as conn:
        kept = conn.execute("SELECT n_docs, total_len FROM retrieval_stores WHERE id = %s", (store_id,)).fetchall()
        counted = conn.execute("SELECT count(*), coalesce(sum(doc_len), 0) FROM retrieval_docs WHERE store_id = %s",
                               (store_id,)).fetchall()
        stale = conn.execute("SELECT count(*) FROM retrieval_postings p JOIN retrieval_docs d ON d.id = p.doc_id "
                             "WHERE d.store_id = %s AND p.doc_len != d.doc_len", (store_id,)).fetchall()
    assert kept == counted and stale == [(0,)]


@pytest.mark.postgres
@pytest.mark.parametrize("name", list(BACKENDS))
def test_on_postgresql_docs_another_program_wrote_are_found_by_what_they_say(name, tmp_path, pg_url):
    backend = _pg_backend(name, tmp_path, pg_url, f"outside-{name}")
    store_id = int(backend._store.store_id)
    try:
        backend.index(DOCS)
        _pg_tool(pg_url, "UPDATE retrieval_docs SET text = %s WHERE text = %s AND store_id = %s",
                 NEW, DOCS[0], store_id)
        _pg_tool(pg_url, "DELETE FROM retrieval_docs WHERE text = %s AND store_id = %s", DOCS[1], store_id)
        assert _found(backend, "invoices emailed billing contacts") == [NEW]
        found = _found(backend, "deploys Tuesday release freeze exports CSV header", k=3)
        assert DOCS[0] not in found and DOCS[1] not in found
        assert backend.has_doc(NEW) and sorted(backend.list_docs()) == sorted([NEW, DOCS[2]])
        _pg_totals_right(pg_url, store_id)
        if name != "bm25":  # vectors of the new text, as a fresh index of it makes them
            with backend._store.read() as conn:
                ids = list(backend._store.ids_by_text(conn, [NEW]).values())
            assert len(backend._store.vectors(ids)) == 1
        backend.delete([NEW])  # middle's own writes after a catch-up keep the totals right
        backend.index([DOCS[0], DOCS[1]])
        _pg_totals_right(pg_url, store_id)
        assert _found(backend, "exports CSV header row") == [DOCS[1]]
    finally:
        backend.close()


@pytest.mark.postgres
def test_a_version_3_database_gets_the_log_in_place(tmp_path, pg_url):
    """The shared tables at schema version 3 (no log, no trigger) are brought to version 4 by the
    next process that opens them; their docs are kept and a tool's rewrite is then caught up."""
    import psycopg

    from backends import pg_database

    backend = _pg_backend("bm25", tmp_path, pg_url, "v3")
    backend.index(DOCS)
    backend.close()  # the last user: the next open checks the schema again
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER retrieval_docs_outside_logged ON retrieval_docs")
        conn.execute("DROP FUNCTION retrieval_log_outside_write()")
        conn.execute("DROP TABLE retrieval_outside_writes, retrieval_needs_vectors")
        conn.execute("UPDATE retrieval_schema SET version = 3")
    backend = _pg_backend("bm25", tmp_path, pg_url, "v3")
    try:
        assert sorted(backend.list_docs()) == sorted(DOCS)
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT version FROM retrieval_schema").fetchone()[0] == pg_database.SCHEMA_VERSION
        _pg_tool(pg_url, "UPDATE retrieval_docs SET text = %s WHERE text = %s", NEW, DOCS[0])
        assert _found(backend, "invoices emailed billing contacts") == [NEW]
        _pg_totals_right(pg_url, int(backend._store.store_id))
    finally:
        backend.close()
