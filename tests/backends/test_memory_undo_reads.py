"""An undo and a show read only the docs they touch (issue 38): the store is never listed, so
they stay quick at 100,000 docs. A plugin-style backend (the real bm25 store, subclassed to
count its listings) is driven through the facade and the Curator as the CLI and API drive it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, cast

import pytest

from backends.bm25.backend import Bm25Backend
from orchestrator.errors import MemoryStoreError
from orchestrator.memory.bulk import DocFilter, forget_all, select, supersede_all
from orchestrator.memory.curation import Curator
from orchestrator.memory.facade import MemoryFacade
from orchestrator.plugins.hookspecs import hookimpl
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.plugins.memory_backend import MemoryBackend
from tickets.store import TicketStore

WHO = "tester@here"
FILLER = "Ticket {n}: tidied module m{n} and its tests."


class CountingBm25(Bm25Backend):
    """bm25 that counts how often the whole store is listed."""

    name = "counting_bm25"
    listings = 0

    def list_docs(self) -> list[str]:
        CountingBm25.listings += 1
        return super().list_docs()

    def list_records(self) -> list[tuple[str, float]]:
        CountingBm25.listings += 1
        return super().list_records()


class ListingOnly(Bm25Backend):
    """bm25 as a third-party backend that does not look docs up by id (the default docs_by_id)."""

    name = "listing_only"
    listings = 0
    docs_by_id = MemoryBackend.docs_by_id  # the default: a listing

    def list_docs(self) -> list[str]:
        ListingOnly.listings += 1
        return super().list_docs()


class NoDocTime(Bm25Backend):
    """bm25 as a third-party backend that keeps times but does not look one up by itself
    (the default doc_time: a listing)."""

    name = "no_doc_time"
    listings = 0
    doc_time = MemoryBackend.doc_time  # the default: a listing

    def list_records(self) -> list[tuple[str, float]]:
        NoDocTime.listings += 1
        return super().list_records()


class Unlisted(Bm25Backend):
    """bm25 as a third-party backend that keeps times but cannot list its docs."""

    name = "unlisted"
    list_records = MemoryBackend.list_records  # type: ignore[assignment]  # the default: list_docs

    def list_docs(self) -> list[str]:
        raise NotImplementedError(f"backend {self.name!r} cannot list its docs")


class _Registers:
    def __init__(self, *classes: type) -> None:
        self.classes = classes

    @hookimpl
    def register_memory_backends(self, register: Callable[[type], None]) -> None:
        for cls in self.classes:
            register(cls)


def _curator(root: Path, backend: str) -> tuple[Curator, TicketStore]:
    registry = PluginRegistry(load_entry_points=False,
                              extra_plugins=(_Registers(CountingBm25, ListingOnly, NoDocTime, Unlisted),))
    facade = MemoryFacade(root / "mem", backend, {}, registry)
    store = TicketStore(root / "middle.sqlite3")
    facade.state_source = store.memory_marks  # as Services wires them
    return Curator(facade, store), store


@pytest.fixture
def counted(tmp_path: Path) -> Any:
    curator, store = _curator(tmp_path, "counting_bm25")
    curator.facade.index("p", [FILLER.format(n=n) for n in range(300)])
    yield curator
    cast(MemoryFacade, curator.facade).close()
    store.close()


def _undo_reads_no_listing(curator: Curator, change: int | None) -> str:
    assert change is not None
    CountingBm25.listings = 0
    done = curator.undo("p", change, WHO)
    assert CountingBm25.listings == 0, f"undo of change {change} listed the store"
    return done.message


def test_an_undo_never_lists_the_store(counted):
    curator = counted
    doc = FILLER.format(n=7)
    assert _undo_reads_no_listing(curator, curator.add("p", "Rule: deploys on Tuesday.", WHO).change) \
        == "undid the add"
    assert not curator.facade.has_doc("p", "Rule: deploys on Tuesday.")
    assert _undo_reads_no_listing(curator, curator.pin("p", doc, WHO).change) == "undid the pin"
    assert not any(s["pinned"] for s in curator.states("p").values())
    until = curator.set_valid_until("p", doc, "2020-01-01", WHO).change
    assert _undo_reads_no_listing(curator, until) == "undid the expire"
    superseded = curator.supersede("p", doc, "Ticket 7: module m7 was removed.", WHO).change
    assert _undo_reads_no_listing(curator, superseded) == "undid the supersede"
    assert not curator.facade.has_doc("p", "Ticket 7: module m7 was removed.")
    edited = curator.edit("p", doc, "Ticket 7: tidied module m7, its tests and docs.", WHO).change
    assert _undo_reads_no_listing(curator, edited) == "undid the edit"
    assert curator.facade.has_doc("p", doc)
    forgotten = curator.forget("p", doc, WHO).change
    assert _undo_reads_no_listing(curator, forgotten) == "undid the delete"
    assert curator.facade.has_doc("p", doc)
    many = [FILLER.format(n=n) for n in range(10, 15)]
    bulk = forget_all(curator, "p", many, WHO, "tests").change
    assert _undo_reads_no_listing(curator, bulk) == "put back 5 docs"
    assert all(curator.facade.has_doc("p", d) for d in many)
    bulk = supersede_all(curator, "p", many, "Modules m10 to m14 were merged.", WHO, "tests").change
    assert _undo_reads_no_listing(curator, bulk) == "undid the supersede of 5 docs"
    assert not any(s["superseded_by"] for s in curator.states("p").values())


def test_an_undo_of_a_doc_changed_since_is_still_refused(counted):
    """The keyed reads see what the listing saw: the pin's doc edited away, its undo refused."""
    curator = counted
    doc = FILLER.format(n=3)
    pinned = curator.pin("p", doc, WHO).change
    curator.facade.delete("p", [doc])  # gone behind the curation's back
    CountingBm25.listings = 0
    with pytest.raises(Exception, match="cannot be undone"):
        curator.undo("p", pinned, WHO)
    assert CountingBm25.listings == 0


def test_show_by_id_never_lists_the_store(counted):
    curator = counted
    doc = FILLER.format(n=42)
    curator.supersede("p", doc, "Ticket 42: module m42 is gone.", WHO)
    CountingBm25.listings = 0
    shown = curator.show("p", _short(doc))
    assert CountingBm25.listings == 0
    assert shown["doc"] == doc and shown["superseded_by"]["doc"] == "Ticket 42: module m42 is gone."


def _short(doc: str) -> str:
    from orchestrator.memory.format import doc_id

    return doc_id(doc)[:8]


def test_a_backend_without_lookup_by_id_is_listed_once_per_undo(tmp_path):
    """A third-party backend that keeps the default docs_by_id: a bulk undo of 5 docs lists it
    once, not once per doc."""
    curator, store = _curator(tmp_path, "listing_only")
    try:
        many = [FILLER.format(n=n) for n in range(5)]
        curator.facade.index("p", many)
        bulk = forget_all(curator, "p", many, WHO, "tests").change
        assert bulk is not None
        ListingOnly.listings = 0
        assert curator.undo("p", bulk, WHO).message == "put back 5 docs"
        assert ListingOnly.listings == 1
    finally:
        cast(MemoryFacade, curator.facade).close()
        store.close()


DAY = 86_400.0
DATED = "Commit {n}: reworked parser p{n}."


def test_a_bulk_change_of_a_filtered_selection_never_lists_the_store(counted):
    """A bulk forget and a bulk supersede of the docs a filter picks read each picked doc's
    time by itself (MemoryBackend.doc_time), not the whole store: picking them lists it once,
    the changes and their undos never; the undo of the forget puts each doc back at its own
    time."""
    curator = counted
    base = 1_700_000_000.0
    dated = [(DATED.format(n=n), base + n * DAY) for n in range(6)]
    curator.facade.index_records("p", dated)
    flt = DocFilter.of(containing="reworked parser")
    CountingBm25.listings = 0
    picked = select(curator, "p", flt)
    assert CountingBm25.listings == 1, "picking the docs listed the store more than once"
    assert picked == [text for text, _ in dated]
    CountingBm25.listings = 0
    forgotten = forget_all(curator, "p", picked, WHO, flt.words()).change
    assert CountingBm25.listings == 0, "the bulk forget listed the store"
    assert not any(curator.facade.has_doc("p", d) for d in picked)
    assert _undo_reads_no_listing(curator, forgotten) == "put back 6 docs"
    assert curator.facade.doc_times("p", picked) == dict(dated)  # each at its own time
    CountingBm25.listings = 0
    superseded = supersede_all(curator, "p", picked, "Parsers p0 to p5 are one parser now.",
                               WHO, flt.words()).change
    assert CountingBm25.listings == 0, "the bulk supersede listed the store"
    assert _undo_reads_no_listing(curator, superseded) == "undid the supersede of 6 docs"
    assert curator.facade.doc_times("p", picked) == dict(dated)


def test_a_backend_without_doc_time_is_listed_once_per_bulk_forget(tmp_path):
    """A third-party backend that keeps the default doc_time (a listing each time): a bulk
    forget of 5 docs lists it once for all their times, not once per doc, and the undo puts
    each back at its own time."""
    curator, store = _curator(tmp_path, "no_doc_time")
    try:
        dated = [(DATED.format(n=n), 1_700_000_000.0 + n * DAY) for n in range(5)]
        curator.facade.index_records("p", dated)
        NoDocTime.listings = 0
        bulk = forget_all(curator, "p", [t for t, _ in dated], WHO, "tests").change
        assert NoDocTime.listings == 1
        assert curator.undo("p", bulk, WHO).message == "put back 5 docs"
        assert curator.facade.doc_times("p", [t for t, _ in dated]) == dict(dated)
    finally:
        cast(MemoryFacade, curator.facade).close()
        store.close()


def test_picking_docs_of_a_backend_that_cannot_list_is_one_error(tmp_path):
    """A filter needs the docs listed: a backend that cannot list them is a MemoryStoreError
    (one `error:` line at the CLI and a 4xx over HTTP), not a NotImplementedError."""
    curator, store = _curator(tmp_path, "unlisted")
    try:
        curator.facade.index("p", [DATED.format(n=1)])
        with pytest.raises(MemoryStoreError, match="cannot list its docs; use `middle memory search`"):
            select(curator, "p", DocFilter.of(containing="parser"))
    finally:
        cast(MemoryFacade, curator.facade).close()
        store.close()
