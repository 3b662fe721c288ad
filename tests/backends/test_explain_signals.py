"""`--explain` names each backend's real signals (issue 38): bm25's score, the vectors' similarity,
hipporag's graph and its facts as the passage's own sentences, hindsight's recall strategies,
sliding_window's recency and what its summary is made of; and a replacement people wrote says it
stands for the doc that matched the query."""

from __future__ import annotations

import re

import pytest
from test_memory_curation import WHO, open_curator

from orchestrator.memory.format import doc_id

DOCS = ["Ticket: Startup. The app_startup hook in datasette/app.py ran twice on boot.",
        "Ticket: Export. The CSV export streams rows from the orders table.",
        "Ticket: Cache. Query results are cached in Redis for ten minutes."]
QUERY = "startup hook ran twice in datasette/app.py"
EXPECTED = {
    "bm25": [r"bm25 \d+\.\d\d"],
    "dense": [r"similarity -?\d\.\d\d"],
    "hybrid": [r"bm25 \d+\.\d\d", r"similarity -?\d\.\d\d"],
    "hipporag": [r"similarity -?\d\.\d\d", r"graph: the query names `[^`]+`"],
    "hindsight": [r"found by (semantic|keyword|graph|temporal) \(#\d+\)", r"facts: \"[A-Z]"],
    "sliding_window": [r"recalled by recency"],
}


@pytest.mark.parametrize("backend", sorted(EXPECTED))
def test_explain_names_the_backends_own_signals(tmp_path, backend):
    curator, store = open_curator(tmp_path, backend)
    memory = curator.facade
    try:
        for doc in DOCS:
            curator.add("p", doc, WHO)
        result = memory.retrieve("p", [QUERY], 3)[0]
        why = {doc: item["why"] for doc, item in
               zip(result["docs"], memory.explain("p", QUERY, result))}
        line = why[DOCS[0]]
        for pattern in EXPECTED[backend]:
            assert re.search(pattern, line), (backend, line)
        if backend == "hipporag":  # the passage's sentence, not a triple
            assert 'facts: "The app_startup hook in datasette/app.py ran twice on boot."' in line
    finally:
        memory.close()
        store.close()


def test_a_replacement_that_shares_no_query_word_says_why_it_is_there(tmp_path):
    curator, store = open_curator(tmp_path, "bm25")
    memory = curator.facade
    try:
        for doc in DOCS:
            curator.add("p", doc, WHO)
        new = "Boot now runs each callback once, guarded by a flag."
        curator.supersede("p", doc_id(DOCS[0])[:8], new, WHO)
        result = memory.retrieve("p", [QUERY], 1)[0]
        assert result["docs"] == [new, DOCS[0]]  # kept below it, however few docs were asked
        why = [item["why"] for item in memory.explain("p", QUERY, result)]
        assert why[0].startswith("bm25: shares no query word")
        assert f"supersedes {doc_id(DOCS[0])[:8]}, which matched the query" in why[0]
        assert f"superseded by {doc_id(new)[:8]} (kept as history)" in why[1]
    finally:
        memory.close()
        store.close()


def test_the_sliding_window_summary_says_what_it_is_and_can_be_shown(tmp_path):
    curator, store = open_curator(tmp_path, "sliding_window")
    memory = curator.facade
    try:
        docs = [f"Ticket {n}: finished step {n}." for n in range(8)]
        for doc in docs:
            curator.add("p", doc, WHO)
        memory.flush()
        result = memory.retrieve("p", ["anything"], 2)[0]
        summary = result["docs"][-1]
        assert summary not in docs and f"[{doc_id(docs[-1])[:8]}] Ticket 7" in summary
        why = memory.explain("p", "anything", result)[-1]["why"]
        assert "a rolling summary by sliding_window of" in why
        shown = curator.show("p", doc_id(summary)[:8])
        assert shown["derived"].startswith("a rolling summary by sliding_window of")
        assert doc_id(docs[-1])[:8] in shown["derived"]
    finally:
        memory.close()
        store.close()
