"""hipporag, hindsight and sliding_window derive structures from their docs (a graph, facts, a
summary) in their own writes, and catch up on the doc rows another program writes, which their
stores' triggers log (backends.rederive.CatchesUp: tests/backends/test_derived_catch_up.py).
A write the log did not see (made before this middle-agent laid the log's triggers, stood for
here by dropping them) still shows: each write of middle's records the count of the docs'
writes it leaves (storage.CountedWrites), so a count it did not leave shows on the next open:
one warning naming `middle memory reindex --from NAME`, kept after middle's later writes (which
would hide it) until the store is rebuilt."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from backends.hindsight.backend import HindsightBackend
from backends.hipporag.backend import HippoRAGBackend
from backends.sliding_window.backend import SlidingWindowBackend
from orchestrator.memory.facade import MemoryFacade
from orchestrator.memory.stores import reindex
from orchestrator.plugin_api import MemoryStoreError
from orchestrator.plugins.manager import PluginRegistry

DOCS = ["Deploys run on Tuesday after the release freeze.", "Exports write CSV files with a header row."]

# backend name -> (open it in a folder, the table and the SQL condition of its docs)
BACKENDS: dict[str, tuple[Callable[[Path], Any], str, str]] = {
    "hipporag": (lambda d: HippoRAGBackend(d, {"embedder": "hashing"}), "passages", "1 = 1"),
    "hindsight": (lambda d: HindsightBackend(d, {"embedder": "hashing"}), "documents", "1 = 1"),
    "sliding_window": (lambda d: SlidingWindowBackend(d, {}), "messages", "conversation_id = ':project:'"),
}

# Another program writing the store as an older middle-agent's store was written: without the
# triggers that log its rows (laid again by the next open)
_TOOL = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
with conn:
    logged = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%_logged'"
    for (name,) in conn.execute(logged).fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute(sys.argv[2])
"""


def _warnings(caplog: pytest.LogCaptureFixture, name: str, folder: Path) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        BACKENDS[name][0](folder).close()
    return [r.getMessage() for r in caplog.records if "written by another program" in r.getMessage()]


@pytest.mark.parametrize("name", list(BACKENDS))
def test_a_write_that_bypassed_the_backend_is_named_on_open(name, tmp_path, caplog):
    opened, table, where = BACKENDS[name]
    backend = opened(tmp_path)
    backend.index(DOCS)
    backend.close()
    assert _warnings(caplog, name, tmp_path) == []  # middle's own writes: nothing to say
    path = tmp_path / type(backend).store_files[0]
    with sqlite3.connect(path) as conn:
        text_column = "text"
        assert conn.execute(f"SELECT count(*) FROM {table} WHERE {where}").fetchone()[0] == 2
    done = subprocess.run([sys.executable, "-c", _TOOL, str(path),
                           f"UPDATE {table} SET {text_column} = {text_column} || ' (edited by hand)' WHERE {where}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    said = _warnings(caplog, name, tmp_path)
    assert len(said) == 1 and f"`middle memory reindex --from {name}`" in said[0] and "2 write(s)" in said[0]
    backend = opened(tmp_path)
    backend.index(["The cache is cleared nightly by cron."])  # a later write of middle's...
    backend.close()
    assert len(_warnings(caplog, name, tmp_path)) == 1  # ...does not hide it


def test_a_rebuild_clears_the_warning(tmp_path, caplog):
    facade = MemoryFacade(tmp_path / "mem", "hipporag", {"embedder": "hashing"},
                          PluginRegistry(load_entry_points=False))
    facade.index("p", DOCS)
    store = facade.store_dir("p")
    facade.release("p")
    done = subprocess.run([sys.executable, "-c", _TOOL, str(store / "hipporag.sqlite3"),
                           "UPDATE passages SET text = text || ' (edited by hand)'"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert len(_warnings(caplog, "hipporag", store)) == 1
    reindex(facade, "p", "hipporag")
    facade.close()
    assert _warnings(caplog, "hipporag", store) == []


@pytest.mark.postgres
def test_on_postgresql_the_warning_names_the_way_to_rebuild_there(tmp_path, pg_url, caplog):
    import psycopg

    from orchestrator.plugin_api import MemoryDatabase

    def opened() -> HindsightBackend:
        return HindsightBackend(tmp_path, {"embedder": "hashing"}, database=MemoryDatabase(pg_url, "w"))

    backend = opened()
    backend.index(DOCS)
    schema = backend.bank.schema
    backend.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # as before the log's trigger was laid
        conn.execute(f"DROP TRIGGER documents_writes_logged ON {schema}.documents")
        conn.execute(f"UPDATE {schema}.documents SET text = text || ' (edited by hand)'")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        opened().close()
    said = [r.getMessage() for r in caplog.records if "written by another program" in r.getMessage()]
    # rebuilt where it is (backends.rederive; tests/cli/test_memory_cli_pg_rebuild.py)
    assert len(said) == 1 and "`middle memory reindex --from hindsight`" in said[0] and "2 write(s)" in said[0]


@pytest.mark.parametrize("name", list(BACKENDS))
def test_a_rebuild_in_place_that_fails_changes_nothing(name, tmp_path, monkeypatch):
    # backends.rederive: the deletes and the adds are one transaction of the store
    opened = BACKENDS[name][0]
    backend = opened(tmp_path)
    backend.index(DOCS)
    before = backend.list_records()

    def broken(self, records):
        raise RuntimeError("the model went away")

    monkeypatch.setattr(type(backend), "index_records", broken)
    with pytest.raises(RuntimeError):
        backend.rebuild_in_place()
    backend.close()
    monkeypatch.undo()
    again = opened(tmp_path)
    assert again.list_records() == before and again.has_doc(DOCS[1])
    assert again.rebuild_in_place() == 2 and sorted(again.list_docs()) == sorted(DOCS)
    again.close()


@pytest.mark.parametrize("name", list(BACKENDS))
def test_a_damaged_log_of_other_programs_writes_names_the_file_and_the_reindex(name, tmp_path):
    # the log holds row ids (its triggers write them); anything else was written by hand, and
    # the catch-up cannot know which doc changed: one error naming the file and the way back,
    # which the reindex takes (it reads the docs' own rows, not the log)
    facade = MemoryFacade(tmp_path / "mem", name, {} if name == "sliding_window" else {"embedder": "hashing"},
                          PluginRegistry(load_entry_points=False))
    facade.index("p", DOCS)
    store = facade.store_dir("p") / f"{name}.sqlite3"
    done = subprocess.run([sys.executable, "-c", "import sqlite3, sys\nwith sqlite3.connect(sys.argv[1]) as c:\n"
                           "    c.execute(\"INSERT INTO outside_log (doc) VALUES ('garbage')\")", str(store)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    with pytest.raises(MemoryStoreError) as caught:
        facade.retrieve("p", ["deploys"])
    said = str(caught.value)
    assert str(store) in said and "'garbage', not a row id" in said and f"middle memory reindex --from {name}" in said
    reindex(facade, "p", name)
    assert sorted(facade.list_docs("p")) == sorted(DOCS)
    assert facade.retrieve("p", ["deploys"], 5)[0]["docs"]
    facade.close()
