"""fact_vectors = "passage": a doc read once gives every fact's vector (its header and sentence
pooled); the bank records the kind; a bank written before goes on embedding facts alone."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from backends.hindsight.bank import FILE_NAME
from backends.hindsight.extract import extract
from backends.retrieval.embedders import make_embedder, minilm
from orchestrator.plugin_api import ConfigError

TICKET = ("Ticket: Fix CSV export for row tables. The --csv option in datasette/views/table.py "
          "raised KeyError when Simon ran it.  It now  works again (see \"the docs.\") Then "
          "also\n\nmore text here for you. Changed: datasette/views/table.py, tests/test_csv.py")


def test_each_fact_is_placed_at_its_header_and_sentence():
    facts = extract(TICKET, 0.0, 60)
    placed = [[TICKET[a:b] for a, b in f.ranges] for f in facts]
    assert placed[0] == ["Ticket: Fix CSV export for row tables.",
                         "The --csv option in datasette/views/table.py raised KeyError when Simon ran it."]
    assert placed[-1][1].startswith("Then also\n\nmore text") and placed[-1][1].endswith("test_csv.py")
    for fact, where in zip(facts, placed):  # what is read is what the fact says
        if where:
            assert " ".join(where[1].split()) == " ".join(fact.text.split(": ", 1)[1].split())
    chat = "Alice: I went to the park today with Bob. It was a sunny day in Paris."
    assert [[chat[a:b] for a, b in f.ranges] for f in extract(chat, 0.0, 60)] == [
        ["Alice:", "I went to the park today with Bob."], ["Alice:", "It was a sunny day in Paris."]]


def test_a_new_bank_records_passage_vectors_and_keeps_them(open_bank, tmp_path):
    open_bank().index([TICKET])
    assert open_bank().fact_vectors == "passage"
    with pytest.raises(ConfigError, match="reindex --from hindsight"):
        open_bank(fact_vectors="text")


def test_a_version_1_bank_goes_on_with_facts_embedded_alone(open_bank, tmp_path):
    open_bank(fact_vectors="text").index([TICKET])
    with sqlite3.connect(tmp_path / "bank" / FILE_NAME) as conn:  # as written before
        conn.execute("DELETE FROM meta WHERE key = 'fact_vector_kind'")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'format_version'")
    with pytest.raises(ConfigError, match="holds fact vectors of kind 'text'"):
        open_bank(fact_vectors="passage")
    assert open_bank().fact_vectors == "text"
    with sqlite3.connect(tmp_path / "bank" / FILE_NAME) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
    assert meta["format_version"] == "2" and meta["fact_vector_kind"] == "text"


@pytest.mark.skipif(not minilm.available(), reason="the offline MiniLM is not installed")
def test_a_doc_is_read_once_and_its_facts_pooled_from_that_pass(open_bank, minilm_calls):
    calls = minilm_calls
    bank = open_bank(embedder="minilm")
    bank.index([TICKET])
    facts = extract(TICKET, 0.0, 60)
    assert calls == [] and all(f.ranges for f in facts)  # every fact read, none embedded alone
    with bank.bank.read() as conn:
        stored = [np.frombuffer(v, dtype=np.float32) for (v,) in conn.execute(
            "SELECT v.vec FROM facts f JOIN vectors v ON v.id = f.id ORDER BY f.position")]
    model = make_embedder("minilm")
    states = model.token_states(TICKET, len(TICKET))
    assert len(stored) == len(facts)
    alone = model.embed_documents([f.text for f in facts])
    unrelated = model.embed_documents(["Grandma's banana bread recipe needs three ripe bananas."])[0]
    for n, (fact, vector) in enumerate(zip(facts, stored)):
        assert np.array_equal(vector, states.pool(fact.ranges))
        assert np.isclose(np.linalg.norm(vector), 1.0, atol=1e-5)
        assert vector @ alone[n] > vector @ unrelated + 0.3  # it reads what the fact says
    hit = bank.retrieve(["KeyError from the csv option"], 1)[0]["docs"]
    assert hit == [TICKET]
