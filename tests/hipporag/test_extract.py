"""OpenIE parts: normalisation, the offline extractor, precomputed files, LLM reply parsing."""

from __future__ import annotations

import json

import pytest

from backends.hipporag.extract import MAX_FACTS, Extraction, extract_offline, normalise
from backends.hipporag.openie import (
    NotJSON,
    Precomputed,
    _NerReply,
    load_precomputed,
    parse_reply,
)
from orchestrator.plugin_api import ConfigError


def test_normalise_lowercases_and_turns_punctuation_and_controls_into_spaces():
    assert normalise("  Jan-Philip  Solovej, Jr.\x00\t") == "jan philip solovej jr"
    assert normalise("module_doc_1") == "module doc 1"
    assert normalise("Zürich 東京") == "zürich 東京"
    assert normalise("!!!") == ""


def test_offline_extractor_finds_names_dates_numbers_and_sentence_facts():
    ex = extract_offline(
        "Journal of Mathematical Physics\nThe Journal of Mathematical Physics is published by "
        "the American Institute of Physics. It was first published in January 1960. "
        "The current editor is Jan Philip Solovej from University of Copenhagen.")
    for name in ("journal of mathematical physics", "american institute of physics",
                 "january 1960", "jan philip solovej", "university of copenhagen"):
        assert name in ex.entities
    assert "the" not in ex.entities and "it" not in ex.entities
    subjects_objects = {(s, o) for s, _, o in ex.triples}
    assert ("journal of mathematical physics", "american institute of physics") in subjects_objects
    assert ("jan philip solovej", "university of copenhagen") in subjects_objects
    # Later sentences hang off the passage's topic (its first entity).
    assert ("journal of mathematical physics", "january 1960") in subjects_objects
    fact = next(t for t in ex.triples if t[2] == "american institute of physics")
    assert "published by" in fact[1]


def test_sentences_naming_nothing_contribute_phrases_about_the_topic():
    ex = extract_offline("Caroline: I joined a new club. The weekly support group felt welcoming, "
                         "really.")
    assert ("caroline", "the", "weekly support group") in ex.triples
    assert "weekly support group" in ex.entities and "really" not in ex.entities


def test_offline_extractor_sees_code_identifiers():
    ex = extract_offline("fixed the csv export in module_doc_7 by raising parseConfig timeout to 30s")
    assert {"module doc 7", "parseconfig", "30s"} <= set(ex.entities)


def test_offline_extractor_on_text_without_entities_and_on_odd_input():
    assert extract_offline("yes we did it again, it was so good").entities == []
    # A first sentence in plain words is a title: its phrases are its entities.
    titled = extract_offline("Make custom type and foreign key exclusive. Nothing else here.")
    assert {"custom type", "foreign key exclusive"} <= set(titled.entities)
    beside = extract_offline("Fix the CSV export of row tables. It failed.")
    assert {"csv", "row tables"} <= set(beside.entities)  # beside a name: multi-word phrases
    assert "export" not in beside.entities  # one word is a hub ("song", "film"), not a topic
    assert any(t[0] == "csv" and t[2] == "row tables" for t in beside.triples)
    assert extract_offline("").triples == []
    weird = extract_offline("Ctrl\x00chars \x07 and 🚀 emoji, then Alice met Bob.\u200f")
    assert {"alice", "bob"} <= set(weird.entities)
    assert all(all(c.isprintable() for c in e) for e in weird.entities)


def test_offline_extractor_is_bounded_on_a_huge_doc():
    big = " ".join(f"Name{i} met Person{i} in City{i}." for i in range(50_000))
    ex = extract_offline(big)
    assert 0 < len(ex.triples) <= MAX_FACTS
    assert ex == extract_offline(big)  # deterministic


def test_build_skips_and_counts_malformed_triples():
    ex = Extraction.build(["Alice"], [["Alice", "knows", "Bob"], ["only", "two"],
                                      ["a", "b", "c", "d"], "not a list", ["x", 1, "y"],
                                      ["!!", "is", "empty"], ["Alice", "knows", "Bob"]], "llm")
    assert ex.skipped_triples == 5
    assert ex.triples == [("alice", "knows", "bob")] * 2  # repeats count as co-occurrences
    assert ex.entities == ["alice", "bob"]


def test_precomputed_sample_loads_and_counts_its_malformed_triples(musique):
    pre = load_precomputed(f"precomputed:{musique / 'openie_triples.json'}")
    raw = json.loads((musique / "openie_triples.json").read_text(encoding="utf-8"))["docs"]
    not_three = sum(1 for d in raw for t in d["extracted_triples"] if len(t) != 3)
    assert not_three == 185  # what shared/data/README.md says, so the check below means something
    assert pre.skipped_triples >= not_three
    assert len(pre.by_text) == len({d["passage"] for d in raw})
    first = pre.get(raw[0]["passage"])
    assert ("journal of mathematical physics", "published by", "american institute of physics") \
        in first.triples
    assert pre.get("a passage that is not in the file") is None


def test_precomputed_file_errors_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_precomputed(f"precomputed:{tmp_path / 'missing.json'}")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="not readable JSON"):
        Precomputed(bad)
    bad.write_text('{"no_docs": []}', encoding="utf-8")
    with pytest.raises(ConfigError, match="no 'docs' list"):
        Precomputed(bad)
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"docs": [
        "not a dict", {"title": "T", "text": "Body", "extracted_entities": "nope",
                       "extracted_triples": [["T", "has", "Body"], ["short"]]}]}), encoding="utf-8")
    pre = Precomputed(odd)
    assert pre.get("T\nBody").triples == [("t", "has", "body")] and pre.skipped_triples == 1


def test_parse_reply_takes_fenced_json_and_refuses_everything_else():
    assert parse_reply('```json\n{"named_entities": ["A"]}\n```', _NerReply).named_entities == ["A"]
    assert parse_reply('Sure! {"named_entities": []} Hope it helps', _NerReply).named_entities == []
    for bad in ("no json here", '{"named_entities": "A"}', "{'named_entities': ['A']}",
                '{"named_entities": [1, 2', "__import__('os').system('true')", None):
        with pytest.raises(NotJSON):
            parse_reply(bad, _NerReply)
