"""Store safety: format versions, embedder binding, kill -9 mid-index, snapshots, the change log."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from backends import storage
from backends.dense import DenseBackend
from backends.hybrid import HybridBackend
from backends.retrieval import store as store_module
from backends.retrieval.embedders import minilm
from orchestrator.plugin_api import MemoryStoreError


def hashing(store_dir, **options):
    return HybridBackend(store_dir, HybridBackend.Options(embedder="hashing", **options))


def test_newer_format_version_is_refused_with_the_file_named(tmp_path):
    hashing(tmp_path).close()
    db = tmp_path / "hybrid.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'format_version'")
    with pytest.raises(MemoryStoreError) as err:
        hashing(tmp_path)
    assert str(db) in str(err.value) and "format version 99" in str(err.value)
    assert "upgrade middle-agent" in str(err.value)


def test_store_built_by_another_embedder_is_refused(tmp_path):
    backend = hashing(tmp_path)
    backend.index(["the cron scheduler skips leap days"])
    backend.close()
    with pytest.raises(MemoryStoreError) as err:
        HybridBackend(tmp_path, HybridBackend.Options(embedder="minilm"))
    message = str(err.value)
    assert "hashing-v1-d384" in message and minilm.MODEL_ID in message
    assert 'embedder = "hashing"' in message and str(tmp_path / "hybrid.sqlite3") in message
    # "auto" adopts whatever the store was built with.
    again = HybridBackend(tmp_path, HybridBackend.Options())
    assert again.embedder.model_id == "hashing-v1-d384"
    assert again.retrieve(["cron leap days"], 1)[0]["docs"] == ["the cron scheduler skips leap days"]
    again.close()


def test_an_empty_store_takes_a_new_embedder(tmp_path):
    hashing(tmp_path).close()
    backend = DenseBackend(tmp_path, DenseBackend.Options(embedder="hashing"))
    backend.close()
    fresh = HybridBackend(tmp_path, HybridBackend.Options(embedder="minilm"))
    assert fresh.embedder.model_id == minilm.MODEL_ID
    fresh.close()


def test_default_options_use_the_offline_model(tmp_path):
    backend = HybridBackend(tmp_path)
    assert backend.embedder.model_id == minilm.MODEL_ID
    backend.index(["Fixed the WiFi by resetting the router's DHCP lease"])
    assert backend.retrieve(["network problem"], 1)[0]["docs"]
    backend.close()


WRITER = textwrap.dedent("""
    import sys
    from backends.hybrid import HybridBackend
    backend = HybridBackend(sys.argv[1], HybridBackend.Options(embedder="hashing"))
    for batch in range(10_000):
        backend.index([f"batch {batch} doc {i} zq{batch}x{i}" for i in range(50)])
        print(batch, flush=True)
""")


def test_kill_9_during_indexing_leaves_the_last_complete_state(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(4):  # let a few batches commit, then kill it mid-stream
            assert proc.stdout.readline(), "the writer died early"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    backend = hashing(tmp_path)
    docs = backend.list_docs()
    assert len(docs) >= 200 and len(docs) % 50 == 0, "a batch was half written"
    batches = len(docs) // 50
    assert docs == [f"batch {b} doc {i} zq{b}x{i}" for b in range(batches) for i in range(50)]
    last = docs[-1]
    assert backend.retrieve([last], 1)[0]["docs"] == [last]
    with sqlite3.connect(tmp_path / "hybrid.sqlite3") as conn:
        assert conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == len(docs)
    backend.index(["after the crash"])
    assert backend.list_docs()[-1] == "after the crash"
    backend.close()


def test_snapshot_speeds_up_open_and_catches_up_on_later_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN_DOCS", 1)
    first = hashing(tmp_path)
    first.index([f"snapshot doc {i} zz{i}" for i in range(20)])
    first.close()
    snapshots = list(tmp_path.glob("hybrid.g*.faiss"))
    assert [p.name for p in snapshots] == ["hybrid.g1.faiss"]
    other = hashing(tmp_path)  # changes after the snapshot: one added, one deleted
    other.index(["added after the snapshot qq77"])
    assert other.delete(["snapshot doc 3 zz3"]) == 1
    other._store._mirror.invalidate()  # forget its mirror: the next call loads snapshot + log
    loaded = []
    original = store_module.VectorIndex.load
    monkeypatch.setattr(store_module.VectorIndex, "load",
                        classmethod(lambda cls, path: loaded.append(path.name) or original(path)))
    assert other.retrieve(["qq77"], 1)[0]["docs"] == ["added after the snapshot qq77"]
    assert loaded == ["hybrid.g1.faiss"]
    assert "snapshot doc 3 zz3" not in other.retrieve(["snapshot doc 3 zz3"], 30)[0]["docs"]
    assert len(other._store._mirror.index) == 20
    other.close()
    assert [p.name for p in tmp_path.glob("hybrid.g*.faiss")] == ["hybrid.g3.faiss"]


def test_a_command_that_never_searched_builds_no_vector_index_on_close_below_the_snapshot_floor(
        tmp_path, monkeypatch):
    # `middle memory list` used to load FAISS and every vector at its close, to find the store
    # too small for a snapshot; the same store at the floor is still built and saved.
    first = hashing(tmp_path)
    first.index([f"listed doc {i}" for i in range(3)])
    first.close()
    built = []
    original = store_module.VectorIndex.__init__
    monkeypatch.setattr(store_module.VectorIndex, "__init__",
                        lambda self, *args: built.append(args) or original(self, *args))
    lister = hashing(tmp_path)
    assert lister.list_docs() == [f"listed doc {i}" for i in range(3)]
    lister.close()
    assert built == [] and not list(tmp_path.glob("hybrid.g*.faiss"))
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN_DOCS", 3)
    lister = hashing(tmp_path)
    assert lister.list_docs()[0] == "listed doc 0"
    lister.close()
    assert len(built) == 1 and [p.name for p in tmp_path.glob("hybrid.g*.faiss")] == ["hybrid.g1.faiss"]


def test_corrupt_snapshot_and_leftover_temp_files_are_harmless(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN_DOCS", 1)
    backend = hashing(tmp_path)
    backend.index(["kept through it all"])
    backend.close()
    (tmp_path / "hybrid.g1.faiss").write_bytes(b"garbage")
    leftover = tmp_path / "hybrid.g1.faiss.abc123.tmp"
    leftover.write_bytes(b"half")
    old = time.time() - 3600
    os.utime(leftover, (old, old))
    again = hashing(tmp_path)
    assert not leftover.exists()
    assert again.retrieve(["kept"], 1)[0]["docs"] == ["kept through it all"]
    again.close()


def test_a_snapshot_damaged_behind_its_header_is_rebuilt_from_the_rows(tmp_path, monkeypatch,
                                                                       caplog):
    # Garbage in the vectors of a snapshot whose FAISS header is intact used to load as noise
    # (an unrelated doc ranked first) and be saved again into the next snapshot.
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN_DOCS", 1)
    docs = [f"routine note {i} on pipeline step Step{i}" for i in range(40)]
    golden = "the login form bug was a missing CSRF token"
    first = DenseBackend(tmp_path, DenseBackend.Options(embedder="hashing"))
    first.index([golden])  # the oldest: recency does not lift it
    first.index(docs)
    first.close()
    (snapshot,) = tmp_path.glob("dense.g*.faiss")
    with open(snapshot, "r+b") as handle:
        handle.seek(4096)  # past the header: FAISS itself reads the file without a complaint
        handle.write(os.urandom(4096))
    again = DenseBackend(tmp_path, DenseBackend.Options(embedder="hashing"))
    with caplog.at_level("WARNING", logger="middle.retrieval.store"):
        assert again.retrieve(["login form bug"], 1)[0]["docs"] == [golden]
    assert str(snapshot) in caplog.text and "checksum" in caplog.text and "rebuilt" in caplog.text
    assert not snapshot.exists(), "the damaged snapshot stays to be warned about (and kept)"
    rows = again._store.vectors(list(range(1, 42)))
    again.close()
    (saved,) = tmp_path.glob("dense.g*.faiss")  # the next snapshot is built from the rows
    index = store_module.VectorIndex.load(saved)
    for doc_id, vectors in rows.items():  # a doc's chunk vectors, under ids doc * 256 + n
        assert index.search(vectors[0], 1)[0] == [doc_id * 256]


def test_a_snapshot_without_a_checksum_is_not_trusted(tmp_path, monkeypatch, caplog):
    import faiss

    monkeypatch.setattr(store_module, "SNAPSHOT_MIN_DOCS", 1)
    backend = hashing(tmp_path)
    backend.index(["kept through it all"])
    backend.close()
    (snapshot,) = tmp_path.glob("hybrid.g*.faiss")
    index = store_module.VectorIndex.load(snapshot)
    faiss.write_index(index._index, str(snapshot))  # as an older middle-agent wrote them
    again = hashing(tmp_path)
    with caplog.at_level("WARNING", logger="middle.retrieval.store"):
        assert again.retrieve(["kept"], 1)[0]["docs"] == ["kept through it all"]
    assert "no checksum" in caplog.text
    again.close()


def test_a_reader_behind_the_pruned_change_log_reloads_in_full(tmp_path, monkeypatch):
    monkeypatch.setattr(storage, "KEEP_GENERATIONS", 10)
    reader, writer = hashing(tmp_path), hashing(tmp_path)
    reader.index(["first doc"])
    assert reader.retrieve(["first"], 1)[0]["docs"] == ["first doc"]
    for i in range(105):  # generation 100 prunes the log below 90
        writer.index([f"writer doc {i} ww{i}"])
    writer.delete(["first doc"])
    assert int(reader._store.read_meta("changes_floor")) == 90
    assert reader.retrieve(["ww104"], 1)[0]["docs"] == ["writer doc 104 ww104"]
    assert len(reader._store._mirror.index) == 105
    reader.close()
    writer.close()
