"""MemoryBackendContract: what every memory backend must do, as a pytest suite to subclass.

Use it from a plugin's tests::

    from orchestrator.testing import MemoryBackendContract

    class TestMyBackend(MemoryBackendContract):
        @pytest.fixture
        def backend_factory(self):
            return lambda store_dir: MyBackend(store_dir, MyBackend.Options())

`backend_factory(store_dir)` opens a backend on that directory (which may not exist yet);
calling it again on the same directory after `close()` is a reopen, and calling it twice gives
two instances on one store (as two processes have). Capability flags below let a backend opt
out of what it cannot do; each opted-out test is skipped with the reason. The tests for other
instances, failed writes, bad input and real processes are in `robustness.py`; set
`process_factory` to run the process test. `curation_contract.py` checks that a person's
supersede, edit, pin and undo reach the next ticket's memories block through the memory facade;
`outside_contract.py`, with your `outside_writer` fixture, that an open instance catches up on
docs another program wrote (`MemoryBackend.catch_up`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

import pytest

from orchestrator.plugins.backend_options import BackendOptions
from orchestrator.plugins.memory_backend import MemoryBackend, RetrieveResult
from orchestrator.testing.curation_contract import CurationContract
from orchestrator.testing.outside_contract import OutsideWritesContract
from orchestrator.testing.robustness import SharedStoreContract
from orchestrator.testing.samples import UNICODE_DOCS, huge_doc, sample_doc

__all__ = ["MemoryBackendContract"]

class _Opener:
    """Opens backends through the factory and closes whatever a test left open."""

    def __init__(self, factory: Callable[[Path], MemoryBackend], store_dir: Path):
        self.factory, self.store_dir = factory, store_dir
        self.open_now: list[MemoryBackend] = []

    def open(self) -> MemoryBackend:
        backend = self.factory(self.store_dir)
        self.open_now.append(backend)
        return backend

    def close(self, backend: MemoryBackend) -> None:
        self.open_now.remove(backend)
        backend.close()


class MemoryBackendContract(CurationContract, SharedStoreContract, OutsideWritesContract):
    """Subclass as `Test...` and provide a `backend_factory` fixture; see the module docstring.

    More flags (`writes_to_disk`, `process_factory`, `leftover_temp_file`) and the
    `fail_writes` fixture are described in `SharedStoreContract`.
    """

    stores_docs = True  # False: keeps nothing (the `none` backend); only shape tests apply
    supports_delete = True
    supports_list_docs = True
    relevance_ranked = True  # False: retrieval by recency (may fold docs into a summary)
    persistent = True  # docs survive close() and a reopen of the same store_dir
    deterministic_retrieve = True  # same store, same query → same result
    relevance_k = 5  # a query equal to a doc must find it within this many results
    huge_doc_chars = 1_000_000
    many_docs_count = 500

    # --- fixtures ------------------------------------------------------------------------

    @pytest.fixture
    def store_dir(self, tmp_path: Path) -> Path:
        return tmp_path / "project-store"  # not created: the backend must create it

    @pytest.fixture
    def opener(self, backend_factory, store_dir):
        opener = _Opener(backend_factory, store_dir)
        yield opener
        for backend in reversed(opener.open_now):
            backend.close()

    @pytest.fixture
    def backend(self, opener) -> MemoryBackend:
        return opener.open()

    # --- helpers -------------------------------------------------------------------------

    def require(self, *flags: str) -> None:
        for flag in flags:
            if not getattr(self, flag):
                pytest.skip(f"backend declares {flag} = False")

    @property
    def k(self) -> int:
        # A recency backend returns the newest docs whatever the query, so ask for plenty.
        return self.relevance_k if self.relevance_ranked else 50

    def found(self, doc: str, result: RetrieveResult) -> bool:
        if doc in result["docs"]:
            return True
        # A recency backend may have folded the doc into a summary that quotes it.
        return not self.relevance_ranked and any(doc in d for d in result["docs"])

    def assert_found(self, backend: MemoryBackend, doc: str) -> None:
        (result,) = backend.retrieve([doc], self.k)
        assert self.found(doc, result), (
            f"indexed doc not retrieved: {doc[:80]!r} → {result['docs']!r}"
        )

    def assert_absent(self, backend: MemoryBackend, doc: str) -> None:
        (result,) = backend.retrieve([doc], 50)
        assert not any(doc in d for d in result["docs"]), f"deleted doc came back: {doc[:80]!r}"

    def assert_shape(self, results: list, queries: list[str], k: int) -> None:
        assert isinstance(results, list) and len(results) == len(queries)
        for query, result in zip(queries, results):
            assert {"question", "docs", "doc_scores"} <= set(result)
            assert result["question"] == query
            assert len(result["docs"]) == len(result["doc_scores"]) <= k
            assert all(isinstance(d, str) for d in result["docs"])
            assert all(isinstance(s, float) for s in result["doc_scores"])

    # --- tests every backend runs ----------------------------------------------------------

    def test_declares_name_and_strict_options(self, backend):
        cls = type(backend)
        assert isinstance(cls.name, str) and cls.name
        assert issubclass(cls.Options, BackendOptions)
        with pytest.raises(ValueError):  # pydantic's ValidationError is a ValueError
            cls.Options(no_such_option_anywhere=1)

    def test_result_shape(self, backend):
        backend.index([sample_doc(i) for i in range(6)])
        queries = ["fixed the login form", sample_doc(2), "nothing in common: xyzzy"]
        for k in (1, 3, 10):
            self.assert_shape(backend.retrieve(queries, k), queries, k)
        if self.relevance_ranked:
            for result in backend.retrieve(queries, 10):
                scores = result["doc_scores"]
                assert scores == sorted(scores, reverse=True), "docs must come best first"

    def test_empty_inputs(self, backend):
        assert backend.retrieve([], 5) == []
        assert backend.retrieve(["anything at all"], 5) == [
            {"question": "anything at all", "docs": [], "doc_scores": []}
        ]
        backend.index([])
        assert backend.delete([]) == 0
        assert backend.retrieve(["anything at all"], 5)[0]["docs"] == []
        if self.supports_list_docs:
            assert backend.list_docs() == []

    def test_delete_unknown_doc_is_harmless(self, backend):
        backend.index([sample_doc(1)])
        assert backend.delete(["never indexed: qwertyuiop"]) == 0
        if self.stores_docs:
            self.assert_found(backend, sample_doc(1))

    def test_concurrent_plain_retrieves(self, backend: MemoryBackend) -> None:
        docs = [sample_doc(i) for i in range(20)]
        backend.index(docs)
        backend.flush()
        queries = [docs[3], "csv export", docs[17]]
        moment = backend.clock()
        backend.clock = lambda: moment  # recency moves with time: compare answers at one moment
        baseline = backend.retrieve(queries, 5)
        errors: list[BaseException] = []
        results: list[list] = []
        barrier = threading.Barrier(8)

        def reader():
            try:
                barrier.wait()
                for _ in range(10):
                    results.append(backend.retrieve(queries, 5))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(results) == 80
        for result in results:
            self.assert_shape(result, queries, 5)
            if self.deterministic_retrieve:
                assert result == baseline

    # --- tests for backends that keep docs -------------------------------------------------

    def test_index_then_retrieve_finds_doc(self, backend):
        self.require("stores_docs")
        docs = [sample_doc(i) for i in range(3)]
        backend.index(docs)
        for doc in docs:
            self.assert_found(backend, doc)
        if self.supports_list_docs:
            assert backend.list_docs() == docs

    def test_indexing_twice_does_not_duplicate(self, backend):
        self.require("stores_docs")
        a, b = sample_doc(1), sample_doc(2)
        backend.index([a, b])
        backend.index([a])
        backend.index([b, b])
        (result,) = backend.retrieve([a], self.k)
        assert result["docs"].count(a) == 1
        if self.supports_list_docs:
            assert sorted(backend.list_docs()) == sorted([a, b])

    def test_delete_removes_doc(self, backend):
        self.require("stores_docs", "supports_delete")
        a, b, c = (sample_doc(i) for i in range(3))
        backend.index([a, b, c])
        assert backend.delete([b]) == 1
        self.assert_absent(backend, b)
        self.assert_found(backend, a)
        self.assert_found(backend, c)
        assert backend.delete([b]) == 0
        assert backend.delete([a, c, "never indexed"]) == 2
        assert backend.retrieve([a], 10)[0]["docs"] == []
        if self.supports_list_docs:
            assert backend.list_docs() == []

    def test_doc_time_is_the_time_its_records_give(self, backend):
        # an edit and its undo keep a doc's time (MemoryBackend.doc_time: one doc looked up)
        self.require("stores_docs", "supports_list_docs")
        docs = [sample_doc(i) for i in range(3)]
        backend.index(docs)
        times = dict(backend.list_records())
        for doc in docs:
            assert backend.doc_time(doc) == times[doc]
        assert backend.doc_time("never indexed") is None

    def test_fingerprint_moves_when_docs_are_added_or_deleted(self, backend):
        # the server's catalog lists the store again when the fingerprint moved though no write
        # through middle noted a doc (MemoryBackend.fingerprint); None: the backend cannot tell
        self.require("stores_docs", "supports_delete")
        a, b = sample_doc(1), sample_doc(2)
        before = backend.fingerprint()
        backend.index([a, b])
        added = backend.fingerprint()
        assert added is None or (isinstance(added, str) and added != before)
        if type(backend).fingerprint is MemoryBackend.fingerprint:
            return  # the default (the store's files): a delete may keep a file's size in one tick
        assert backend.delete([b]) == 1
        assert backend.fingerprint() not in (added, before)

    def test_docs_by_id_finds_each_doc_by_the_start_of_its_id(self, backend):
        # `middle memory show|pin|edit|delete ID` finds a doc by its id's start (docs_by_id):
        # each doc by its own, none by an id no doc has, none once deleted
        self.require("stores_docs", "supports_list_docs")
        from orchestrator.memory.format import doc_id

        docs = [sample_doc(i) for i in range(6)]
        backend.index(docs)
        for doc in docs:
            assert backend.docs_by_id(doc_id(doc)[:8]) == [doc]
            assert backend.docs_by_id(doc_id(doc)) == [doc]
        taken = {doc_id(d)[:4] for d in docs}
        free = next(p for p in (f"{n:04x}" for n in range(65536)) if p not in taken)
        assert backend.docs_by_id(free) == []
        if self.supports_delete:
            backend.delete([docs[0]])
            assert backend.docs_by_id(doc_id(docs[0])[:8]) == []

    def test_the_batch_id_lookup_agrees_with_the_per_id_one(self, backend):
        # the block resolves all its ids in one call (docs_by_ids, or list_ids): whatever a
        # backend implements of them must answer as docs_by_id does, prefix by prefix, even
        # for two docs whose first 8 characters meet (found by counting up: both 563c539b)
        self.require("stores_docs", "supports_list_docs")
        from orchestrator.memory.format import doc_id

        pair = ["Deploy note 16640: the staging cluster moved.", "Deploy note 67893: the staging cluster moved."]
        docs = [sample_doc(i) for i in range(6)] + pair
        backend.index(docs)
        taken = {doc_id(d)[:4] for d in docs}
        free = next(p for p in (f"{n:04x}" for n in range(65536)) if p not in taken)
        for prefixes in ([doc_id(d)[:8] for d in docs], [doc_id(pair[0])[:8], doc_id(docs[0])[:4], free],
                         [doc_id(pair[1])[:9], doc_id(pair[1])[:9]], [free], []):
            batch = backend.docs_by_ids(list(prefixes))
            assert len(batch) == len(set(batch)), prefixes  # each doc once
            assert set(batch) == {d for p in prefixes for d in backend.docs_by_id(p)}, prefixes
        ids = backend.list_ids()
        if ids is not None:
            assert sorted(ids) == sorted(doc_id(d) for d in docs)

    def test_persistence_across_reopen(self, opener):
        self.require("stores_docs", "persistent")
        docs = [sample_doc(i) for i in range(3)]
        first = opener.open()
        first.index(docs)
        opener.close(first)
        second = opener.open()
        for doc in docs:
            self.assert_found(second, doc)
        if self.supports_list_docs:
            assert second.list_docs() == docs
        if self.supports_delete:
            assert second.delete([docs[0]]) == 1
            opener.close(second)
            third = opener.open()
            self.assert_absent(third, docs[0])
            self.assert_found(third, docs[2])

    def test_concurrent_index_and_retrieve_with_lock(self, backend: MemoryBackend) -> None:
        self.require("stores_docs")
        lock = threading.Lock()  # the facade serialises calls per project like this
        errors: list[BaseException] = []
        barrier = threading.Barrier(8)
        per_writer = 10

        def writer(w: int):
            try:
                barrier.wait()
                for i in range(per_writer):
                    with lock:
                        backend.index([sample_doc(i, tag=f"w{w}x")])
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        def reader(r: int):
            try:
                barrier.wait()
                for i in range(per_writer):
                    with lock:
                        query = [sample_doc(i, f"w{r}x")]
                        self.assert_shape(backend.retrieve(query, 5), query, 5)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        threads += [threading.Thread(target=reader, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        expected = [sample_doc(i, f"w{w}x") for w in range(4) for i in range(per_writer)]
        if self.supports_list_docs:
            listed = backend.list_docs()
            assert sorted(listed) == sorted(expected)
        if self.relevance_ranked:
            for doc in expected:
                self.assert_found(backend, doc)
        elif self.supports_list_docs:
            self.assert_found(backend, listed[-1])

    def test_huge_doc(self, backend):
        self.require("stores_docs")
        big = huge_doc(self.huge_doc_chars)
        assert len(big) >= self.huge_doc_chars
        backend.index([sample_doc(1), big, sample_doc(2)])
        query = "Huge design note zqhugemarker: storage layer explained."
        (result,) = backend.retrieve([query], self.k)
        assert big in result["docs"], "the huge doc must come back whole and unchanged"
        if self.supports_list_docs:
            assert big in backend.list_docs()

    def test_many_docs(self, backend):
        self.require("stores_docs")
        docs = [sample_doc(i, tag="many") for i in range(self.many_docs_count)]
        for start in range(0, len(docs), 100):
            backend.index(docs[start:start + 100])
        self.assert_shape(backend.retrieve([docs[0], docs[-1]], 10), [docs[0], docs[-1]], 10)
        if self.supports_list_docs:
            assert backend.list_docs() == docs
        if self.relevance_ranked:
            for doc in (docs[0], docs[len(docs) // 2], docs[-1]):
                self.assert_found(backend, doc)
        else:
            self.assert_found(backend, docs[-1])

    def test_unicode_round_trips_exactly(self, opener):
        self.require("stores_docs")
        backend = opener.open()
        backend.index(UNICODE_DOCS)
        if self.persistent:
            opener.close(backend)
            backend = opener.open()
        for doc in UNICODE_DOCS:
            (result,) = backend.retrieve([doc], self.k)
            assert doc in result["docs"], f"not returned byte-for-byte: {doc!r}"
        if self.supports_list_docs:
            assert backend.list_docs() == UNICODE_DOCS
