"""Concurrent writers, a writer killed mid-index, the real ONNX embedder, the `memory graph` command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
from click.testing import CliRunner

from backends.hipporag import HippoRAGBackend


def doc(writer: int, i: int) -> str:
    return f"Writer{writer} note {i}: Team{writer} fixed Module{i} for Client{i % 3}."


def test_two_instances_in_two_threads_index_at_once_without_a_lock(open_backend):
    first, second = open_backend(), open_backend()
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def write(backend, writer):
        try:
            barrier.wait()
            for i in range(15):
                backend.index([doc(writer, i)])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(b, w)) for w, b in enumerate((first, second))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    expected = {doc(w, i) for w in range(2) for i in range(15)}
    assert set(first.list_docs()) == set(second.list_docs()) == expected
    # Shared entities (Client0..2) were added by whichever writer came first, once.
    with first.read() as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM entities")]
    assert len(names) == len(set(names)) and "client0" in names
    assert first.retrieve([doc(1, 7)], 3)[0]["docs"][0] == doc(1, 7)
    assert second.retrieve([doc(0, 3)], 3)[0]["docs"][0] == doc(0, 3)


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from backends.hipporag import HippoRAGBackend
    backend = HippoRAGBackend(Path(sys.argv[1]), {"embedder": "hashing"})
    for batch in range(10_000):
        backend.index([f"Batch{batch} doc{j}: Person{j} met Person{j + 1} in City{batch}."
                       for j in range(20)])
        print(batch, flush=True)
""")


def test_a_writer_killed_mid_index_leaves_the_last_complete_state(tmp_path):
    store = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(store)], stdout=subprocess.PIPE,
                            text=True, cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        for _ in range(3):  # three batches committed, the fourth (or later) under way
            assert proc.stdout.readline(), "the writer died early"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    backend = HippoRAGBackend(store, {"embedder": "hashing"})
    try:
        docs = backend.list_docs()
        assert len(docs) >= 60 and len(docs) % 20 == 0, "a batch is all or nothing"
        with backend.read() as conn:
            orphans = conn.execute("SELECT COUNT(*) FROM passage_entities WHERE passage NOT IN "
                                   "(SELECT id FROM passages)").fetchone()[0]
            without_vector = conn.execute("SELECT COUNT(*) FROM passages WHERE id NOT IN "
                                          "(SELECT id / 256 FROM passage_chunks)").fetchone()[0]
        assert orphans == without_vector == 0
        assert backend.retrieve([docs[-1]], 1)[0]["docs"] == [docs[-1]]
        backend.index(["After the crash: Alice met Bob."])
        assert backend.list_docs()[-1] == "After the crash: Alice met Bob."
    finally:
        backend.close()


def test_default_options_run_the_real_onnx_embedder_offline(tmp_path):
    from backends.retrieval.embedders import minilm

    if not minilm.available():
        pytest.skip("the offline MiniLM package is not installed")
    backend = HippoRAGBackend(tmp_path / "store")  # defaults: auto embedder, no LLM
    try:
        assert backend.embedder.model_id == minilm.MiniLMEmbedder().model_id
        docs = ["Ticket: Fix login. The OAuth callback in AuthService dropped the state param.",
                "Ticket: CSV export. Quoted fields with commas broke ExportWriter.",
                "Ticket: Speed up search. Added a FAISS index to SearchService."]
        backend.index(docs)
        (result,) = backend.retrieve(["the export writer mangles commas in quoted csv fields"], 3)
        assert result["docs"][0] == docs[1]
    finally:
        backend.close()


def test_memory_graph_command(tmp_path, monkeypatch):
    from orchestrator.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMORY_SAVE_DIR", raising=False)
    # The config reads MIDDLE_* variables as overrides and refuses MIDDLE_AGENT_CACHE_DIR, so
    # the private cache goes through XDG_CACHE_HOME here.
    monkeypatch.setenv("XDG_CACHE_HOME", os.environ["MIDDLE_AGENT_CACHE_DIR"])
    monkeypatch.delenv("MIDDLE_AGENT_CACHE_DIR")
    (tmp_path / "middle.toml").write_text(
        '[project]\nid = "p"\n[memory]\nsave_dir = "mem"\nbackend = "hipporag"\n'
        '[memory.options]\nembedder = "hashing"\n')
    runner = CliRunner()
    for text in ("Alice Smith fixed the Payment Webhook.", "Bob Jones reviewed the Payment Webhook."):
        result = runner.invoke(main, ["memory", "add", text])
        assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["memory", "graph", "--format", "json", "--no-passages"])
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(result.stdout)
    labels = {n["label"] for n in data["nodes"]}
    assert {"alice smith", "bob jones", "payment webhook"} <= labels
    out = tmp_path / "memory.graphml"
    result = runner.invoke(main, ["memory", "graph", "-o", str(out)])
    assert result.exit_code == 0 and out.read_text(encoding="utf-8").startswith("<graphml")
    (tmp_path / "middle.toml").write_text('[memory]\nsave_dir = "mem"\nbackend = "bm25"\n')
    result = runner.invoke(main, ["memory", "graph"])
    assert result.exit_code == 1 and 'backend = "hipporag"' in result.stderr
