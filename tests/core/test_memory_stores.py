"""A project's stores under several backends: locate a doc, forget it wherever it is, reindex."""

from __future__ import annotations

import json
import sqlite3

import pytest

from backends.retrieval.cache import CACHE_ENV
from backends.retrieval.embedders import minilm
from orchestrator.errors import ConfigError
from orchestrator.memory.facade import MemoryFacade, doc_id
from orchestrator.memory.stores import forget, locate, reindex, store_counts
from orchestrator.plugins.manager import PluginRegistry

REGISTRY = PluginRegistry(load_entry_points=False)


@pytest.fixture(autouse=True)
def _private_embedding_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "embedding-cache"))


def facade(tmp_path, backend: str, **options) -> MemoryFacade:
    return MemoryFacade(tmp_path / "mem", backend, options, REGISTRY)


def test_forget_deletes_a_doc_where_it_lives_and_says_where(tmp_path):
    old = facade(tmp_path, "bm25")
    old.index("p", ["Ticket: Fix login. Reset the cookie.", "Ticket: Speed up export."])
    old.close()
    new = facade(tmp_path, "hybrid", embedder="hashing")  # [memory] backend switched
    new.index("p", ["Ticket: Add dark mode."])
    assert locate(new, "p", ["Ticket: Fix login. Reset the cookie."]) == {
        "Ticket: Fix login. Reset the cookie.": ["bm25"]}
    report = forget(new, "p", ["Ticket: Fix login. Reset the cookie.", "Ticket: Add dark mode.",
                               "Ticket: never indexed."],
                    {"Ticket: Fix login. Reset the cookie.": "bm25"})
    assert report.deleted == {"hybrid": 1, "bm25": 1} and report.missing == ["Ticket: never indexed."]
    text = report.describe()
    assert text.startswith("2 memory doc(s) deleted (1 from hybrid; 1 from the bm25 store in ")
    assert str(new.store_dir("p")) in text and "before [memory] backend became 'hybrid'" in text
    assert "1 doc(s) are in no store" in text
    new.close()
    old = facade(tmp_path, "bm25")
    assert old.list_docs("p") == ["Ticket: Speed up export."]
    old.close()


def test_forget_without_a_record_still_finds_the_doc(tmp_path):
    old = facade(tmp_path, "bm25")
    old.index("p", ["only in bm25"])
    old.close()
    new = facade(tmp_path, "dense", embedder="hashing")
    assert forget(new, "p", ["only in bm25"]).deleted == {"bm25": 1}
    assert not (new.store_dir("p") / "dense.sqlite3").exists()  # looking created no store
    new.close()


def test_reindex_copies_docs_and_their_times_into_the_configured_backend(tmp_path):
    old = facade(tmp_path, "bm25")
    old.index("p", ["first doc about caching", "second doc about parsing"])
    with old.other_backend("p", "bm25", "read") as backend:
        times = [t for _, t in backend.list_records()]
    old.close()
    new = facade(tmp_path, "hybrid", embedder="hashing")
    new.index("p", ["second doc about parsing"])
    report = reindex(new, "p", "bm25")
    assert (report.copied, report.already, report.backup) == (1, 1, None)
    assert sorted(new.list_docs("p")) == ["first doc about caching", "second doc about parsing"]
    with new.other_backend("p", "hybrid", "read") as backend:
        kept = dict(backend.list_records())
    assert kept["first doc about caching"] == times[0]  # its age survives the copy
    assert [(n, c) for n, c, _ in store_counts(new, "p")] == [("bm25", 2), ("hybrid", 2)]
    with pytest.raises(ConfigError, match="has no hipporag store"):
        reindex(new, "p", "hipporag")
    with pytest.raises(ConfigError, match="unknown memory backend"):
        reindex(new, "p", "nope")
    new.close()


@pytest.mark.skipif(not minilm.available(), reason="needs the embeddings extra")
def test_reindex_from_itself_re_embeds_a_store_built_without_a_model(tmp_path):
    before = facade(tmp_path, "hybrid", embedder="hashing")
    before.index("p", ["the wifi keeps dropping", "lunch order for friday"])
    before.close()
    after = facade(tmp_path, "hybrid")  # embedder "auto": the store's own (hashing) until rebuilt
    report = reindex(after, "p", "hybrid")
    assert report.copied == 2 and report.backup is not None
    assert (report.backup / "hybrid.sqlite3").is_file()
    db = sqlite3.connect(after.store_dir("p") / "hybrid.sqlite3")
    model = db.execute("SELECT value FROM meta WHERE key = 'embedder_model_id'").fetchone()[0]
    db.close()
    assert model == minilm.MODEL_ID
    assert after.retrieve("p", ["wireless network disconnects"], 1)[0]["docs"] == [
        "the wifi keeps dropping"]
    after.close()


def test_doc_ids_are_stable_prefixes_of_the_text_hash(tmp_path):
    mem = facade(tmp_path, "bm25")
    mem.index("p", ["alpha doc", "beta doc"])
    full = doc_id("alpha doc")
    assert mem.find_docs("p", full[:4]) == ["alpha doc"] == mem.find_docs("p", "alpha doc")
    assert mem.find_docs("p", "zz") == [] and mem.find_docs("p", "not hex!") == []
    assert mem.has_doc("p", "beta doc") and not mem.has_doc("p", "gamma doc")
    assert json.dumps(full)  # plain hex
    mem.close()


def _two_sharing_a_prefix() -> tuple[str, str]:
    """Two doc texts whose ids start with the same 4 hex characters (found by counting up)."""
    seen: dict[str, str] = {}
    for i in range(100_000):
        text = f"Ticket: Task {i}. Changed src/f{i}.py."
        other = seen.setdefault(doc_id(text)[:4], text)
        if other != text:
            return other, text
    raise AssertionError("no two texts share a 4-character id prefix")


@pytest.mark.parametrize("backend", ["bm25", "sliding_window"])
def test_a_doc_is_found_by_its_id_among_many_and_an_ambiguous_prefix_finds_each(tmp_path, backend):
    # the store is asked for the id (a range of its hash key), among many docs
    from orchestrator.memory.curation import CurationError, Curator, MemoryDocNotFound
    from tickets.store import TicketStore

    a, b = _two_sharing_a_prefix()
    many = [f"Ticket: Other {i}." for i in range(200)]
    mem = facade(tmp_path, backend)
    mem.index("p", many + [a, b])
    assert mem.find_docs("p", doc_id(a)[:4]) == [a, b]  # oldest first
    assert mem.find_docs("p", doc_id(b)[:12]) == [b] and mem.find_docs("p", doc_id(many[7])) == [many[7]]
    curator = Curator(mem, TicketStore(tmp_path / "tickets.sqlite3"))
    assert curator.find("p", doc_id(many[123])[:8].upper()) == many[123]
    assert curator.find("p", a) == a  # its exact text
    with pytest.raises(CurationError, match="starts 2 docs' ids"):
        curator.find("p", doc_id(a)[:4])
    free = next(p for p in (f"{n:08x}" for n in range(1 << 20))
                if not any(doc_id(d).startswith(p) for d in many + [a, b]))
    with pytest.raises(MemoryDocNotFound, match=f"has an id starting '{free}'"):
        curator.find("p", free)
    mem.close()


def test_a_rebuild_stopped_after_its_new_store_is_complete_is_finished_on_next_open(
        tmp_path, monkeypatch, caplog):
    from orchestrator.memory import rebuild as memory_rebuild
    mem = facade(tmp_path, "hybrid", embedder="hashing")
    mem.index("p", ["the wifi keeps dropping", "lunch order for friday"])

    def killed(store, journal):  # the process dies once the journal says "copy"
        raise KeyboardInterrupt

    monkeypatch.setattr(memory_rebuild, "_finish", killed)
    with pytest.raises(KeyboardInterrupt):
        reindex(mem, "p", "hybrid")
    mem.close()
    monkeypatch.undo()
    store = tmp_path / "mem" / "p"
    assert (store / memory_rebuild.JOURNAL_NAME).exists()
    again = facade(tmp_path, "hybrid", embedder="hashing")
    with caplog.at_level("WARNING", logger="middle.memory"):
        assert sorted(again.list_docs("p")) == ["lunch order for friday", "the wifi keeps dropping"]
    assert "an interrupted `middle memory reindex` of the hybrid store" in caplog.text
    assert "was finished" in caplog.text
    assert not (store / memory_rebuild.JOURNAL_NAME).exists()
    (backup,) = store.glob(".reindex-*")
    assert (backup / "hybrid.sqlite3").is_file() and not (backup / "new").exists()
    db = sqlite3.connect(store / "hybrid.sqlite3")  # the rebuilt store, its count carried on
    gen, floor = (int(db.execute("SELECT value FROM meta WHERE key = ?", (k,)).fetchone()[0])
                  for k in ("generation", "changes_floor"))
    db.close()
    assert gen == floor > 1
    again.close()


def test_a_corrupt_rebuild_journal_is_an_error_naming_it(tmp_path):
    from orchestrator.errors import MemoryStoreError
    from orchestrator.memory import rebuild as memory_rebuild

    mem = facade(tmp_path, "bm25")
    mem.index("p", ["a doc"])
    mem.close()
    journal = tmp_path / "mem" / "p" / memory_rebuild.JOURNAL_NAME
    journal.write_text('{"backend": "bm25", "files": ["../../etc"], "backup": ".reindex-x", '
                       '"phase": "copy", "started": "now"}')
    again = facade(tmp_path, "bm25")
    with pytest.raises(MemoryStoreError, match=f"reindex journal {journal} is corrupt"):
        again.list_docs("p")
    again.close()


def test_a_store_with_another_page_size_is_rebuilt_in_place(tmp_path):
    path = tmp_path / "mem" / "p" / "bm25.sqlite3"
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    db.execute("PRAGMA page_size=1024")  # as an SQLite older than 3.12 made its files
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    mem = facade(tmp_path, "bm25")
    mem.index("p", ["kept across the rebuild"])
    assert reindex(mem, "p", "bm25").copied == 1
    assert mem.list_docs("p") == ["kept across the rebuild"]
    mem.close()
