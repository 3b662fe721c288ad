"""Writes that bypass the facade reach the board (issue 38): a plugin's own tool, or another
program, that adds, deletes or rewrites docs in the store notes nothing in the change log; the
server's kept catalog sees the backend's fingerprint move (MemoryBackend.fingerprint: the
built-in stores count their docs' writes by triggers; the default reads the store's files) and
lists the store again, so the next page shows the change. A recall (which only touches access
counts) keeps it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from fastapi.testclient import TestClient

from orchestrator.bench.memory_page import PROJECT, bench_project, doc_text, fill_memory
from orchestrator.plugins.memory_backend import HASHED_FILE_BYTES, MemoryBackend, file_mark, files_fingerprint
from orchestrator.server import create_app

DOCS = f"/api/projects/{PROJECT}/memory/docs"
SIZE = 200
OUTSIDE = "Written by another tool straight into the bm25 store."

# Another process opens the project's bm25 store itself (no facade, no change log) and writes.
_WRITER = """
import sys
from pathlib import Path
from backends.bm25.backend import Bm25Backend
backend = Bm25Backend(Path(sys.argv[1]), Bm25Backend.Options())
if sys.argv[2] == "index":
    backend.index([sys.argv[3]])
else:
    assert backend.delete([sys.argv[3]]) == 1
backend.close()
"""


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Any]]:
    config = bench_project(tmp_path)
    app = create_app(config)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        state = app.state.middle
        fill_memory(state.memory(), state.store, PROJECT, 0, SIZE)
        yield client, state


def _outside(state: Any, verb: str, text: str) -> None:
    store = state.memory().store_dir(PROJECT)
    done = subprocess.run([sys.executable, "-c", _WRITER, str(store), verb, text],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def _texts(client: TestClient) -> list[str]:
    page = client.get(DOCS, params={"limit": 500}).json()
    return [d["text"] for d in page["docs"]]


def test_a_write_past_the_facade_shows_on_the_next_page(served):
    client, state = served
    assert len(_texts(client)) == SIZE
    catalog = state.catalogs[PROJECT]

    _outside(state, "index", OUTSIDE)
    texts = _texts(client)
    assert OUTSIDE in texts and len(texts) == SIZE + 1
    relisted = state.catalogs[PROJECT]
    assert relisted is not catalog  # the log said nothing: listed again

    _outside(state, "delete", doc_text(5))
    texts = _texts(client)
    assert doc_text(5) not in texts and len(texts) == SIZE


def test_a_write_past_the_facade_between_writes_through_it_still_shows(served):
    """The log names docs written through middle meanwhile, so it is not silent: the store's
    fingerprint after the last of them (kept in the log) is what tells the outside write."""
    client, state = served
    assert len(_texts(client)) == SIZE
    curator = state.services.curator()
    curator.add(PROJECT, "Through middle, before the other tool.", "me")
    _outside(state, "index", OUTSIDE)
    curator.add(PROJECT, "Through middle, after the other tool.", "me")
    texts = _texts(client)
    assert OUTSIDE in texts and len(texts) == SIZE + 3
    catalog = state.catalogs[PROJECT]
    curator.add(PROJECT, "Through middle alone.", "me")  # nothing else wrote: caught up
    assert "Through middle alone." in _texts(client)
    assert state.catalogs[PROJECT] is catalog
    curator.forget(PROJECT, "Through middle alone.", "me")  # the log names a doc, not OUTSIDE
    _outside(state, "delete", OUTSIDE)  # after the last write through middle
    texts = _texts(client)
    assert OUTSIDE not in texts and "Through middle alone." not in texts and len(texts) == SIZE + 2


# Another program, with no middle-agent code: rewrites one doc's text in place (the count of
# docs and the newest id stay as they were; the store's triggers count the write).
_REWRITER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
with conn:
    assert conn.execute("UPDATE docs SET text = ? WHERE text = ?", (sys.argv[3], sys.argv[2])).rowcount == 1
"""


def test_a_doc_rewritten_in_place_shows_on_the_next_page(served):
    client, state = served
    assert doc_text(7) in _texts(client)
    catalog = state.catalogs[PROJECT]
    store = state.memory().store_dir(PROJECT) / "bm25.sqlite3"
    rewritten = "Rewritten in place by another tool: " + doc_text(7)
    done = subprocess.run([sys.executable, "-c", _REWRITER, str(store), doc_text(7), rewritten],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    texts = _texts(client)
    assert rewritten in texts and doc_text(7) not in texts and len(texts) == SIZE
    assert state.catalogs[PROJECT] is not catalog  # the log said nothing: listed again


def test_a_recall_or_a_page_alone_does_not_list_the_store_again(served):
    client, state = served
    _texts(client)
    catalog = state.catalogs[PROJECT]
    state.memory().retrieve(PROJECT, [doc_text(3)], 5)  # touches access counts in the store
    _texts(client)
    assert state.catalogs[PROJECT] is catalog


def test_each_built_in_fingerprint_follows_the_docs_only(tmp_path):
    """bm25 (the retrieval stores) and sliding_window: an add and a delete move it, a recall
    does not."""
    from backends.bm25.backend import Bm25Backend
    from backends.sliding_window.backend import SlidingWindowBackend

    for cls in (Bm25Backend, SlidingWindowBackend):
        options = cls.Options(**({"background": False} if cls is SlidingWindowBackend else {}))
        backend = cls(tmp_path / cls.name, options)
        try:
            empty = backend.fingerprint()
            backend.index(["one doc about deploys", "another about exports"])
            two = backend.fingerprint()
            assert two != empty
            backend.retrieve(["deploys"], 2)
            assert backend.fingerprint() == two, cls.name
            backend.delete(["one doc about deploys"])
            backend.index(["one doc about deploys"])  # the same count again: still another value
            assert backend.fingerprint() not in (two, empty), cls.name
        finally:
            backend.close()


def test_the_default_fingerprint_is_the_store_files(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    assert files_fingerprint(store) is None  # no files: cannot tell
    (store / "mine.db").write_bytes(b"one")
    (store / "other.txt").write_bytes(b"x")
    first = files_fingerprint(store)
    named = files_fingerprint(store, ("mine.db",))
    (store / "other.txt").write_bytes(b"xy")
    assert files_fingerprint(store) != first
    assert files_fingerprint(store, ("mine.db",)) == named  # another backend's file: not ours
    (store / "mine.db-wal").write_bytes(b"a write")
    assert files_fingerprint(store, ("mine.db",)) != named  # a file beside it, named after it
    assert MemoryBackend.fingerprint.__doc__ and "cheap" in MemoryBackend.fingerprint.__doc__


def test_the_default_fingerprint_sees_a_same_size_write_within_one_clock_tick(tmp_path):
    """Two same-size writes within one tick of a coarse file system clock leave the inode, size,
    mtime and ctime as they were: a small file's content decides (file_mark with identical
    stats, as such writes leave them). A file too large to hash is told apart by its times: a
    tool that sets its mtime back still moves its ctime."""
    small = tmp_path / "store.json"
    small.write_bytes(b'{"docs": ["one"]}')
    same_tick = os.stat(small)  # the stats both writes leave within one tick
    first = file_mark(str(small), same_tick, hashed=True)
    small.write_bytes(b'{"docs": ["two"]}')
    assert file_mark(str(small), same_tick, hashed=True) != first
    assert file_mark(str(small), same_tick, hashed=False) == file_mark(str(small), same_tick, hashed=False)

    big = tmp_path / "big.db"
    big.write_bytes(b"a" * (HASHED_FILE_BYTES + 1))
    before, stat = files_fingerprint(tmp_path, ("big.db",)), os.stat(big)
    big.write_bytes(b"b" * (HASHED_FILE_BYTES + 1))  # same size, not hashed: too large
    os.utime(big, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # its mtime set back
    assert os.stat(big).st_mtime_ns == stat.st_mtime_ns
    assert files_fingerprint(tmp_path, ("big.db",)) != before  # the ctime moved


def test_the_default_fingerprint_hashes_a_bounded_amount(tmp_path):
    """Content is hashed up to HASHED_BYTES in all (it is read on every page), never SQLite's
    -shm (every reader rewrites it); past that, a file's stats alone count, so a same-size
    rewrite with its stats as they were goes unseen (what is still possible, as its docstring
    says)."""
    from orchestrator.plugins.memory_backend import HASHED_BYTES, fingerprinted_files

    for n in range(5):
        (tmp_path / f"part{n}").write_bytes(bytes([n]) * HASHED_FILE_BYTES)
    (tmp_path / "part.db-shm").write_bytes(b"read marks")
    assert HASHED_BYTES // HASHED_FILE_BYTES == 4  # part4 is past the budget
    hashed = [Path(path).name for path, _, hashed in fingerprinted_files(tmp_path) if hashed]
    assert hashed == ["part0", "part1", "part2", "part3"]


@pytest.mark.postgres
def test_a_write_past_the_facade_on_postgresql(tmp_path, pg_url):
    """A store in the shared database keeps its log and the mark there (PgChangeLog): another
    instance of the backend writing the project's rows directly is noticed the same way."""
    from orchestrator.memory.catalog import build_catalog, catch_up
    from orchestrator.memory.facade import MemoryFacade
    from orchestrator.plugins.manager import PluginRegistry
    from tickets.store import TicketStore

    facade = MemoryFacade(tmp_path / "mem", "bm25", {}, PluginRegistry(load_entry_points=False), url=pg_url)
    store = TicketStore(tmp_path / "middle.sqlite3")

    def outside(verb: str, text: str) -> None:  # the backend on the database, not the facade
        backend = facade.open_backend(facade.backend_cls, PROJECT, facade.options)
        try:
            backend.index([text]) if verb == "index" else backend.delete([text])
        finally:
            backend.close()

    try:
        facade.index(PROJECT, [doc_text(i) for i in range(20)])
        catalog = build_catalog(facade, store, PROJECT)
        assert catch_up(catalog, facade, store, PROJECT)  # nothing changed: kept
        facade.index(PROJECT, ["Through middle."])
        assert catch_up(catalog, facade, store, PROJECT)  # a noted write: caught up
        outside("index", OUTSIDE)
        assert not catch_up(catalog, facade, store, PROJECT)  # the log silent, the docs moved
        catalog = build_catalog(facade, store, PROJECT)
        assert OUTSIDE in {r.text for r in catalog.rows}
        facade.index(PROJECT, ["Through middle, again."])
        outside("delete", OUTSIDE)  # after the last write through middle
        assert not catch_up(catalog, facade, store, PROJECT)
        catalog = build_catalog(facade, store, PROJECT)
        outside("index", OUTSIDE)
        facade.index(PROJECT, ["Through middle, after the other tool."])  # starts the log over
        assert not catch_up(catalog, facade, store, PROJECT)
        catalog = build_catalog(facade, store, PROJECT)
        assert len(catalog.rows) == 24
        # another program rewrites a doc's text in place (no middle-agent code): the trigger
        # counts the write, so the fingerprint moves though the count and newest id do not
        rewritten = "Rewritten in place by another tool: " + doc_text(3)
        done = subprocess.run([sys.executable, "-c", _PG_REWRITER, pg_url, doc_text(3), rewritten],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert not catch_up(catalog, facade, store, PROJECT)
        texts = {r.text for r in build_catalog(facade, store, PROJECT).rows}
        assert rewritten in texts and doc_text(3) not in texts and len(texts) == 24
    finally:
        facade.close()
        store.close()


_PG_REWRITER = """
import psycopg, sys
with psycopg.connect(sys.argv[1]) as conn:
    done = conn.execute("UPDATE retrieval_docs SET text = %s WHERE text = %s", (sys.argv[3], sys.argv[2]))
    assert done.rowcount == 1
"""


def test_stats_counts_the_docs_from_the_catalog_not_a_listing(served, monkeypatch):
    """`GET .../memory/stats` at 100,000 docs must not list the store on every call: it counts
    the kept catalog's rows, which an outside write still moves (the fingerprint)."""
    client, state = served
    stats = f"/api/projects/{PROJECT}/memory/stats"
    assert client.get(stats).json()["docs"] == SIZE  # builds the catalog (one listing)
    facade_type = type(state.memory())
    listed: list[str] = []
    real = facade_type.list_docs
    monkeypatch.setattr(facade_type, "list_docs", lambda self, pid: listed.append(pid) or real(self, pid))
    assert client.get(stats).json()["docs"] == SIZE
    assert listed == []  # the kept catalog, no listing
    monkeypatch.undo()
    _outside(state, "index", OUTSIDE)
    assert client.get(stats).json()["docs"] == SIZE + 1
