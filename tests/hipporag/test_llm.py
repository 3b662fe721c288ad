"""The LLM paths with an honest fake: OpenIE (schema-checked, cached, non-JSON falls back) and the filter."""

from __future__ import annotations

import json

import pytest

from backends.hipporag.extract import extract_offline
from orchestrator.plugin_api import ConfigError

DOCS = ["Marker1: Ada Lovelace wrote notes on the Analytical Engine.",
        "Marker2: Charles Babbage designed the Analytical Engine in London.",
        "Marker3: Grace Hopper built the first compiler."]
ENTITIES = {"Marker1": ["Ada Lovelace", "Analytical Engine"],
            "Marker2": ["Charles Babbage", "Analytical Engine", "London"],
            "Marker3": ["Grace Hopper"]}
TRIPLES = {"Marker1": [["Ada Lovelace", "wrote notes on", "Analytical Engine"]],
           "Marker2": [["Charles Babbage", "designed", "Analytical Engine"],
                       ["Analytical Engine", "designed in", "London"], ["malformed", "pair"]],
           "Marker3": "Sorry, I cannot answer in JSON today."}


def facts_of(backend) -> set[tuple[str, str, str]]:
    with backend.read() as conn:
        return set(conn.execute(
            "SELECT s.name, f.predicate, o.name FROM facts f JOIN entities s ON s.id = f.subject "
            "JOIN entities o ON o.id = f.object"))


def test_llm_openie_validated_cached_and_a_non_json_reply_falls_back(open_backend, openie_llm):
    llm = openie_llm(ENTITIES, TRIPLES)
    backend = open_backend(llm=llm, recognition_filter=False)
    backend.index(DOCS)
    # Two calls per passage: NER, then triples conditioned on the entities it named.
    assert len(llm.calls) == 6
    ner, triples = llm.calls[2], llm.calls[3]
    assert DOCS[1] in ner["prompt"] and "named entities" in ner["system"]
    assert DOCS[1] in triples["prompt"]
    assert json.dumps(ENTITIES["Marker2"]) in triples["prompt"]
    facts = facts_of(backend)
    assert ("ada lovelace", "wrote notes on", "analytical engine") in facts
    assert ("charles babbage", "designed", "analytical engine") in facts
    assert not any("malformed" in f[0] for f in facts)  # the 2-item triple was skipped
    # Marker3's triples reply was not JSON: that passage got the offline extractor, the rest
    # of the batch kept the LLM's facts.
    offline = extract_offline(DOCS[2])
    assert set(offline.triples) <= facts and offline.triples
    with backend.read() as conn:
        sources = dict(conn.execute("SELECT text, source FROM passages"))
    assert [sources[d] for d in DOCS] == ["llm", "llm", "offline"]

    # A new store with the same docs asks the LLM only for the passage it has no result for.
    again = open_backend("again", llm=llm, recognition_filter=False)
    llm.calls.clear()
    again.index(DOCS)
    assert [c for c in llm.calls if "Marker3" in c["prompt"]] == llm.calls and len(llm.calls) == 2
    assert facts_of(again) == facts


def test_llm_errors_fall_back_per_passage(open_backend, recording_llm):
    def answer(system: str, prompt: str) -> str:
        if "Marker1" in prompt:
            raise TimeoutError("model overloaded")
        return json.dumps({"named_entities": []} if "named entities" in system else {"triples": []})

    backend = open_backend(llm=recording_llm(answer), recognition_filter=False, openie_cache=False)
    backend.index(DOCS[:2])
    assert backend.list_docs() == DOCS[:2]
    assert ("ada lovelace", "wrote notes on the", "analytical engine") in facts_of(backend)


def test_openie_llm_without_a_model_is_a_config_error(tmp_path):
    from backends.hipporag import HippoRAGBackend

    with pytest.raises(ConfigError, match="needs a memory model"):
        HippoRAGBackend(tmp_path / "s", {"embedder": "hashing", "openie": "llm"})


def test_recognition_filter_keeps_what_the_llm_keeps(open_backend, openie_llm, recording_llm):
    indexer = open_backend(llm=openie_llm(ENTITIES, {**TRIPLES, "Marker3": [
        ["Grace Hopper", "built", "first compiler"]]}), recognition_filter=False)
    indexer.index(DOCS)
    indexer.close()
    seen: list[str] = []

    def keep_babbage(system: str, prompt: str) -> str:
        seen.append(prompt)
        return json.dumps({"facts": [["charles babbage", "designed", "analytical engine"],
                                     ["invented", "by", "the model"]]})

    backend = open_backend(llm=recording_llm(keep_babbage))
    (result,) = backend.retrieve(["Who designed the Analytical Engine?"], 3)
    assert len(seen) == 1 and "Who designed the Analytical Engine?" in seen[0]
    assert "charles babbage" in seen[0]
    assert result["docs"][0] == DOCS[1]

    # Nothing kept: dense passage retrieval.
    none_kept = open_backend(llm=recording_llm(lambda s, p: '{"facts": []}'))
    dense = open_backend(llm=None)
    q = ["Grace Hopper compiler"]
    assert none_kept.retrieve(q, 3)[0]["docs"] == [
        d for d in sorted(DOCS, key=lambda d: -float(dense.embedder.embed_query(q[0]) @
                                                     dense.embedder.embed_documents([d])[0]))]
    # A filter reply that is not JSON keeps every fact (same as no filter).
    garbled = open_backend(llm=recording_llm(lambda s, p: "I think all of them?"))
    assert garbled.retrieve(q, 3) == open_backend(llm=None).retrieve(q, 3)
