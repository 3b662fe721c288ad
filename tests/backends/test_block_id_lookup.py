"""The block finds the ids of all the docs it shows in one query of the store
(MemoryBackend.docs_by_ids), on SQLite and on PostgreSQL: the same block as a lookup per doc
gave, colliding id prefixes included, and as many statements for 20 docs shown as for 5."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import pytest
from test_doc_id_prefix import OTHERS, A, B

from backends.bm25.backend import Bm25Backend
from orchestrator.memory.facade import MemoryFacade
from orchestrator.memory.format import doc_id
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.plugins.memory_backend import MemoryBackend
from tickets.store import TicketStore

QUERY = "deploys wait for the release check module"


class Counting:
    """A connection that counts the statements run through it."""

    def __init__(self, conn: Any, seen: list[str]):
        self._conn, self._seen = conn, seen

    def execute(self, sql: Any, *args: Any, **kwargs: Any) -> Any:
        self._seen.append(str(sql))
        return self._conn.execute(sql, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _count_reads(store: Any, seen: list[str]) -> None:
    """Every read transaction of `store` counts its statements in `seen`."""
    read = store.read

    @contextmanager
    def counted() -> Iterator[Any]:
        with read() as conn:
            yield Counting(conn, seen)

    store.read = counted


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def memory(request, tmp_path) -> Iterator[tuple[MemoryFacade, TicketStore]]:
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    mem = MemoryFacade(tmp_path / "mem", "bm25", {}, PluginRegistry(load_entry_points=False), url=url)
    store = TicketStore(tmp_path / "tickets.sqlite3")
    mem.state_source = store.memory_marks
    mem.index("p", OTHERS + [A, B])
    try:
        yield mem, store
    finally:
        mem.close()
        store.close()


def _block(mem: MemoryFacade, limit: int) -> str:
    return mem.block("p", [], mem.retrieve("p", [QUERY], limit), limit=limit).text


def test_the_block_is_the_one_a_lookup_per_doc_gave(memory, monkeypatch):
    mem, _ = memory
    batched = _block(mem, 20)
    assert f"[{doc_id(A)[:11]}] {A}" in batched and f"[{doc_id(B)[:11]}] {B}" in batched
    monkeypatch.setattr(Bm25Backend, "docs_by_ids", MemoryBackend.docs_by_ids)  # docs_by_id per doc
    assert _block(mem, 20) == batched


def test_the_statements_of_a_block_do_not_grow_with_the_docs_shown(memory, monkeypatch):
    mem, _ = memory
    _block(mem, 20)  # opened, caught up
    with mem._locked("p", "test") as backend:
        store = backend._store  # type: ignore[attr-defined]
    seen: list[str] = []
    _count_reads(store, seen)
    results = {n: mem.retrieve("p", [QUERY], n) for n in (5, 20)}
    counts = {}
    for n, result in results.items():
        seen.clear()
        shown = mem.block("p", [], result, limit=n)
        assert len(shown.related) == n
        counts[n] = len(seen)
    assert 0 < counts[5] == counts[20], counts
    # a lookup per doc (what the store's default docs_by_ids does) grows with them: the count can fail
    monkeypatch.setattr(Bm25Backend, "docs_by_ids", MemoryBackend.docs_by_ids)
    seen.clear()
    mem.block("p", [], results[20], limit=20)
    assert len(seen) > counts[20]
