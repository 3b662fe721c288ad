"""retain and recall on a real bank (SQLite + FAISS, hashing embedder): strategies, filters,
entities, links, observations, exact deletes, bad input."""

from __future__ import annotations

import sqlite3

import pytest
from hindsight_helpers import ts

from backends.hindsight import HindsightBackend, bank
from orchestrator.plugin_api import MemoryStoreError


def rows(backend: HindsightBackend, sql: str, *args) -> list[tuple]:
    with backend.bank.read() as conn:
        return conn.execute(sql, args).fetchall()


def texts(hits) -> list[str]:
    return [h.text for h in hits]


def test_retain_with_time_and_tags_then_recall_filters_by_kind_and_tags(open_bank):
    hb = open_bank()
    hb.retain("We fixed the flaky upload test by raising the timeout.", ts("2023-05-02"), ["team-a", "ci"])
    hb.retain("The upload service stores files in the blob bucket.", ts("2023-05-03"), ["team-b"])
    hb.retain("Upload limits are 10 MB per file.", ts("2023-05-04"), ["weird tag/ü ' \" %"])
    everything = texts(hb.recall_query("upload", 10).hits)
    assert len(everything) == 3
    assert texts(hb.recall_query("upload", 10, types=["experience"]).hits) == [
        "We fixed the flaky upload test by raising the timeout."]
    assert texts(hb.recall_query("upload", 10, tags=["team-b", "nope"]).hits) == [
        "The upload service stores files in the blob bucket."]
    assert texts(hb.recall_query("upload", 10, tags=["team-a", "team-b"], tags_match="all").hits) == []
    assert len(hb.recall_query("upload", 10, tags=["team-a", "ci"], tags_match="all").hits) == 1
    assert texts(hb.recall_query("upload", 10, tags=["weird tag/ü ' \" %"]).hits) == [
        "Upload limits are 10 MB per file."]
    with pytest.raises(ValueError):
        hb.recall_query("upload", 10, types=["opinion"])
    with pytest.raises((TypeError, ValueError)):
        hb.retain("x y z w", tags="not-a-list")


def test_each_strategy_finds_what_only_it_can(open_bank):
    hb = open_bank(semantic_link_threshold=0.99, temporal_links_per_fact=0)
    hb.retain("Ticket: Parser crash. Fixed the zqparser crash in tokenizer_core.", ts("2023-05-01"))
    hb.retain("Ticket: Cache cleanup. The tokenizer_core module was moved to a new package.", ts("2023-04-01"))
    hb.retain("Ticket: Docs. Wrote the onboarding guide for new engineers.", ts("2023-05-05"))
    result = hb.recall_query("zqparser crash", 10)
    by_text = {h.text: h.found_by for h in result.hits}
    assert "keyword" in by_text["Ticket Parser crash: Fixed the zqparser crash in tokenizer_core."]
    # Shares only the rare entity tokenizer_core with the best hit: reached by the graph.
    assert "graph" in by_text["Ticket Cache cleanup: The tokenizer_core module was moved to a new package."]
    recent = hb.recall_query("what did we do in May 2023", 10)
    temporal = [h.text for h in recent.hits if "temporal" in h.found_by]
    assert sorted(temporal) == sorted(["Ticket Parser crash: Fixed the zqparser crash in tokenizer_core.",
                                       "Ticket Docs: Wrote the onboarding guide for new engineers."])
    assert recent.span is not None


def test_entities_are_resolved_not_duplicated(open_bank):
    hb = open_bank()
    hb.retain("Yesterday the review with Caroline Lee and Bob went well.", ts("2023-05-01"))
    hb.retain("Later on, Bob said that Caroline liked the new design.", ts("2023-05-02"))
    hb.retain("Melanie: I painted a lake.", ts("2023-05-02"))
    hb.retain("Melanie: I think Mel is a nicer name for me, says Mel.", ts("2023-05-03"))
    names = sorted(r[0] for r in rows(hb, "SELECT name FROM entities"))
    assert names == ["Bob", "Caroline Lee", "Melanie"]
    aliases = dict(rows(hb, "SELECT alias, entity_id FROM entity_aliases"))
    assert aliases["caroline"] == aliases["caroline lee"] and aliases["mel"] == aliases["melanie"]


def test_links_of_every_kind_are_stored(open_bank):
    hb = open_bank(semantic_link_threshold=0.5)
    hb.retain("The deploy failed on Monday. So we rolled back the release.", ts("2023-05-01"))
    hb.retain("The deploy failed again on Tuesday.", ts("2023-05-02"))
    kinds = {r[0] for r in rows(hb, "SELECT kind FROM links")}
    assert kinds == {"temporal", "semantic", "causal"}
    assert rows(hb, "SELECT COUNT(*) FROM links WHERE kind = 'causal'") == [(2,)]  # both ways


def test_near_duplicates_become_one_observation_with_history_and_evidence(open_bank):
    hb = open_bank(consolidate_threshold=0.9)
    a = "Always run the database migrations before the integration tests."
    hb.retain(a, ts("2023-05-01"), document_id="a")
    hb.retain(a.replace("Always run", "Always, run"), ts("2023-05-02"), document_id="b")
    obs = rows(hb, "SELECT id, text, sources, version FROM facts WHERE kind = 'observation'")
    assert len(obs) == 1 and obs[0][2] == 2
    hb.retain(a.replace("Always run", "Always do run"), ts("2023-05-03"), document_id="c")
    obs_id, text, sources, version = rows(hb, "SELECT id, text, sources, version FROM facts "
                                               "WHERE kind = 'observation'")[0]
    assert sources == 3 and version == 2 and "do run" in text
    assert [r[0] for r in rows(hb, "SELECT version FROM observation_history WHERE obs_id = ? "
                                   "ORDER BY version", obs_id)] == [1, 2]
    (hit,) = hb.recall_query("database migrations", 1, types=["observation"]).hits
    assert hit.sources == 3
    # Deleting the doc the observation's words came from re-words it from what remains.
    assert hb.delete([a.replace("Always run", "Always do run")]) == 1
    assert "do run" not in rows(hb, "SELECT text FROM facts WHERE kind = 'observation'")[0][0]
    assert hb.delete([a.replace("Always run", "Always, run")]) == 1
    assert rows(hb, "SELECT COUNT(*) FROM facts WHERE kind = 'observation'") == [(0,)]
    assert hb.list_docs() == [a]


def test_re_retaining_a_document_id_replaces_its_facts(open_bank):
    hb = open_bank()
    hb.retain("The build uses Makefiles for everything.", document_id="build-notes")
    hb.retain("The build uses Bazel since the migration.", document_id="build-notes")
    assert hb.list_docs() == ["The build uses Bazel since the migration."]
    assert all("Makefiles" not in h.text for h in hb.recall_query("Makefiles build", 10).hits)
    assert rows(hb, "SELECT COUNT(*) FROM vectors") == rows(hb, "SELECT COUNT(*) FROM facts")


def test_delete_one_fact_exactly(open_bank):
    hb = open_bank()
    hb.index(["Ticket: Login. The login form trims whitespace. The password field is masked."])
    hits = hb.recall_query("login form whitespace", 5).hits
    target = next(h for h in hits if "whitespace" in h.text)
    assert hb.delete_fact(target.id) and not hb.delete_fact(target.id)
    left = texts(hb.recall_query("login form whitespace", 5).hits)
    assert left == ["Ticket Login: The password field is masked."]
    assert rows(hb, "SELECT COUNT(*) FROM links WHERE src = ? OR dst = ?", target.id, target.id) == [(0,)]
    remaining = next(h for h in hb.recall_query("password", 5).hits)
    assert hb.delete_fact(remaining.id)
    assert hb.list_docs() == []  # a document left with no facts goes too


def test_bad_input_long_query_empty_bank_and_odd_text(open_bank):
    hb = open_bank(max_query_chars=100)
    assert hb.recall_query("anything", 5).hits == []
    assert hb.reflect("anything?").answer.startswith("No memories")
    assert hb.agent_context() == ""
    assert hb.retrieve(["x" * 5000], 3) == [{"question": "x" * 5000, "docs": [], "doc_scores": []}]
    hb.index(["The cache key includes the user id.", "   ", "Memories invoked:\nold stuff"])
    assert len(hb.list_docs()) == 3  # whitespace and memory-only docs are kept, verbatim
    result = hb.recall_query("cache key " + "padding " * 500, 5)
    assert result.truncated and len(result.query) == 100
    assert result.hits[0].text == "The cache key includes the user id."
    with pytest.raises(ValueError):
        hb.retain("fine text here", timestamp=float("nan"))


def test_corrupt_and_newer_banks_are_refused_with_their_path(tmp_path):
    store = tmp_path / "corrupt"
    store.mkdir()
    (store / bank.FILE_NAME).write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(MemoryStoreError, match=str(store / bank.FILE_NAME)):
        HindsightBackend(store, {"embedder": "hashing"})
    newer = tmp_path / "newer"
    HindsightBackend(newer, {"embedder": "hashing"}).close()
    with sqlite3.connect(newer / bank.FILE_NAME) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'format_version'")
    with pytest.raises(MemoryStoreError, match="newer"):
        HindsightBackend(newer, {"embedder": "hashing"})
    with sqlite3.connect(newer / bank.FILE_NAME) as conn:
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'format_version'")
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('embedder_spec', '{not json')")
    with pytest.raises(MemoryStoreError, match="corrupt"):
        HindsightBackend(newer, {"embedder": "hashing"})


def test_a_bank_refuses_another_embedder_and_reindex_rebuilds_it(tmp_path):
    """One policy for every store: a bank keeps its embedder; `middle memory reindex --from
    hindsight` rebuilds it with the one now configured (here the real ONNX MiniLM)."""
    from orchestrator.memory.facade import MemoryFacade
    from orchestrator.memory.stores import reindex
    from orchestrator.plugins.manager import PluginRegistry

    store = tmp_path / "mem" / "p"
    first = HindsightBackend(store, {"embedder": "hashing"})
    first.index(["The invoice PDF renderer crashed on Arabic names.",
                 "Our team lunch is on Fridays."])
    first.close()
    with pytest.raises(MemoryStoreError, match="middle memory reindex --from hindsight"):
        HindsightBackend(store, {"embedder": "minilm"})
    facade = MemoryFacade(tmp_path / "mem", "hindsight", {"embedder": "minilm"},
                          PluginRegistry(load_entry_points=False))
    try:
        assert reindex(facade, "p", "hindsight").copied == 2
    finally:
        facade.close()
    second = HindsightBackend(store, {})  # "auto" keeps the bank's recorded embedder: MiniLM now
    try:
        assert second.embedder.model_id.startswith("all-MiniLM-L6-v2")
        # No word in common with the doc: only a semantic model finds it.
        (hit, *_) = second.recall_query("bill document generation failure", 2).hits
        assert "invoice PDF" in hit.text and "semantic" in hit.found_by
        # Embedded ahead into the cache, a doc then retains without running the model.
        doc = "Ticket: Fonts. The renderer now embeds Noto Naskh. It covers Arabic names."
        second.warm_embeddings([doc])
        second.embedder._embed = None  # any model call now fails
        second.index([doc])
        assert doc in second.list_docs()
    finally:
        second.close()
