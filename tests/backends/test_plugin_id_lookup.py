"""A third-party backend's block ids (docs/memory-backend.md, "for speed"): one that lists its
ids (`list_ids`) has all the ids of a block resolved in one call of it, and two docs whose
first 8 characters meet are each shown by the 9 that tell them apart; one with none of the
lookups keeps 8 and is never listed for a block. The keyword plugin, subclassed."""

from __future__ import annotations

import hashlib

from middle_agent_keyword_memory.backend import KeywordBackend
from orchestrator.memory.facade import MemoryFacade
from orchestrator.memory.format import doc_id
from orchestrator.plugin_api import hookimpl
from orchestrator.plugins.manager import PluginRegistry

# Found by counting up: their SHA-256 ids both start 563c539b.
ONE = "Deploy note 16640: the staging cluster moved."
TWO = "Deploy note 67893: the staging cluster moved."
OTHERS = [f"Ticket: Other change {i}. Changed: src/m{i}.py" for i in range(20)]


class ListingIds(KeywordBackend):
    name = "keyword_ids"
    calls: list[str] = []

    def list_ids(self):
        ListingIds.calls.append("list_ids")
        return [hashlib.sha256(d.encode()).hexdigest() for d in self.list_docs()]

    def docs_by_id(self, prefix):
        ListingIds.calls.append("docs_by_id")
        return super().docs_by_id(prefix)


class Plain(KeywordBackend):
    name = "keyword_plain"
    listed = 0

    def list_docs(self):
        Plain.listed += 1
        return super().list_docs()


class _Plugin:
    @hookimpl
    def register_memory_backends(self, register):
        register(ListingIds)
        register(Plain)


def facade(tmp_path, backend: str) -> MemoryFacade:
    mem = MemoryFacade(tmp_path / backend, backend, {}, PluginRegistry(load_entry_points=False,
                                                                       extra_plugins=(_Plugin(),)))
    mem.index("p", OTHERS + [ONE, TWO])
    return mem


def block(mem: MemoryFacade) -> str:
    return mem.block("p", [], mem.retrieve("p", ["staging cluster moved"], 5), limit=5).text


def test_a_backend_that_lists_its_ids_shows_each_colliding_doc_by_its_own_id(tmp_path):
    mem = facade(tmp_path, "keyword_ids")
    ListingIds.calls.clear()
    text = block(mem)
    assert f"[{doc_id(ONE)[:9]}] {ONE}" in text and f"[{doc_id(TWO)[:9]}] {TWO}" in text
    assert ListingIds.calls == ["list_ids"]  # one call for the block's ids, none per doc
    assert mem.short_ids("p", [doc_id(ONE), doc_id(OTHERS[3])]) == {
        doc_id(ONE): doc_id(ONE)[:9], doc_id(OTHERS[3]): doc_id(OTHERS[3])[:8]}
    mem.close()


def test_the_default_batch_lookup_reads_the_store_once_not_once_per_id(tmp_path):
    mem = facade(tmp_path, "keyword_plain")
    prefixes = [doc_id(d)[:8] for d in OTHERS[:10] + [ONE]]
    with mem._locked("p", "test") as backend:
        Plain.listed = 0
        found = backend.docs_by_ids(prefixes)
        assert Plain.listed == 1 and set(found) == set(OTHERS[:10] + [ONE, TWO])
    Plain.listed = 0
    text = block(mem)  # not asked for ids at all: a listing of every text per block is too much
    assert f"[{doc_id(ONE)[:8]}] {ONE}" in text and Plain.listed == 0
    mem.close()
