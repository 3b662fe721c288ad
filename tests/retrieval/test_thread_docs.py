"""An issue thread scored as one document (backends/retrieval/thread_docs.py): with thread_docs,
a stored doc that shares no word with the query is recalled when its issue thread, read as a
whole, matches the query."""

from __future__ import annotations

import pytest

from backends.hybrid import HybridBackend
from backends.retrieval import thread_docs
from orchestrator.plugin_api import MemoryDatabase

HOUR = 3600.0
START = 1_700_000_000.0

QUERY = "Show many rows when the count times out"
# Thread #10: its first ticket matches the query; the doc to find shares no word with it.
FIRST = "Ticket: Row count times out on big tables. Changed: app/count.py. Issues: #10."
TARGET = "Ticket: Expand foreign references without inspect. Changed: app/expand.py. Issues: #10."


def _chores(n: int) -> list[str]:
    return [f"Ticket: Chore {i}: bump the widget{i} pin. Changed: requirements{i}.txt" for i in range(n)]


def test_a_thread_is_two_or_more_docs_naming_one_issue_and_a_doc_joins_each_of_its_threads():
    index = thread_docs.ThreadIndex()
    index.update("a", {1: "count #10", 2: "inspect #10 #20", 3: "timeout #20", 4: "alone #30",
                       5: "no issue here"})
    assert index.members(10) == [1, 2]
    assert index.members(20) == [2, 3]
    assert index.members(30) == []  # one doc is only itself: no pseudo-document
    assert [issue for issue, _ in index.threads("alone", 5)] == []
    assert [issue for issue, _ in index.threads("count", 5)] == [10]
    # the thread's words are its members' words together, stemmed as the store's BM25 stems
    assert sorted(issue for issue, _ in index.threads("counting timeouts", 5)) == [10, 20]


def test_length_normalisation_keeps_an_umbrella_thread_from_winning_by_its_size():
    """An umbrella issue thirty tickets name, one of them about the count, against a thread of
    two tickets about it: BM25's length normalisation puts the small thread first, though the
    umbrella holds the word as often."""
    texts = {i: f"Ticket: widget {i} polish and cleanup. Issues: #1." for i in range(30)}
    texts[0] = "Ticket: count times out. Issues: #1."
    texts[100] = "Ticket: count times out on big tables. Issues: #2."
    texts[101] = "Ticket: paginate the rows. Issues: #2."
    index = thread_docs.ThreadIndex()
    index.update("a", texts)
    ranked = index.threads("count times out", 5)
    assert [issue for issue, _ in ranked] == [2, 1]
    assert ranked[0][1] > ranked[1][1]


def test_the_thread_list_scores_a_doc_by_its_best_thread_and_orders_mates_by_their_own_score():
    index = thread_docs.ThreadIndex()
    index.update("a", {1: "count timeout #10", 2: "inspect #10", 3: "foreign #10",
                       4: "count #20", 5: "keys #20 #10", 6: "unrelated #30", 7: "other #30"})
    listed = index.thread_list("count timeout", 10, own={3: 0.9, 1: 0.5})
    # #10 matches best (count and timeout); its members: 3 then 1 by their own score, then the
    # ones outside the fused list, newer first (5, 2); #20's member 4 after (5 is #10's already)
    assert [doc for doc, _ in listed.ranked] == [3, 1, 5, 2, 4]
    assert listed.thread_of == {3: 10, 1: 10, 5: 10, 2: 10, 4: 20}
    scores = dict(listed.ranked)
    assert scores[3] == scores[2] > scores[4]
    assert 6 not in scores  # no match, no place
    cut = index.thread_list("count timeout", 2, own={})
    assert [doc for doc, _ in cut.ranked] == [5, 3]  # cut at the pool, newest first among ties


def test_the_threads_follow_the_store_edits_and_forgets_included():
    index = thread_docs.ThreadIndex()
    texts = {1: "count #10", 2: "inspect #10"}
    index.update("a", texts)
    assert [issue for issue, _ in index.threads("inspect", 5)] == [10]
    texts[2] = "foreign keys #10"  # an edit: the thread's text is written again
    index.update("b", texts)
    assert index.threads("inspect", 5) == []
    assert [issue for issue, _ in index.threads("foreign", 5)] == [10]
    texts[3] = "inspect #20"
    texts[4] = "timeout #20"
    index.update("c", texts)
    assert index.members(20) == [3, 4]
    del texts[1]  # forgotten: thread #10 has one doc left, no thread any more
    index.update("d", texts)
    assert index.members(10) == [] and index.threads("foreign", 5) == []
    assert index.members(20) == [3, 4]
    index.update("d", {})  # the same key: nothing read again
    assert index.members(20) == [3, 4]


def test_a_store_with_code_terms_indexes_its_threads_with_them():
    index = thread_docs.ThreadIndex()
    texts = {1: "Changed datasette/utils/asgi.py #5", 2: "more work #5"}
    index.update("a", texts, code=False)
    assert index.threads("asgi_send", 5) == []
    index.update("a", texts, code=True)  # the flag alone re-indexes every thread
    assert [issue for issue, _ in index.threads("utils/asgi.py", 5)] == [5]


def test_explain_line_names_the_thread_its_matching_words_and_its_size():
    index = thread_docs.ThreadIndex()
    index.update("a", {1: "Row count times out #418", 2: "Expand foreign keys #418"})
    words = index.matched_words(418, "Show the counts when it timed out")
    assert words == ["counts", "timed"]  # Porter-stemmed as the store's BM25: count, time
    assert thread_docs.explain_line(418, words, 2) == 'thread #418 matches "counts", "timed" (2 docs)'


def _history(backend: HybridBackend, docs: list[str]) -> None:
    now = [START]
    backend.clock = lambda: now[0]
    for i, doc in enumerate(docs):  # one ticket an hour, oldest first
        now[0] = START + i * HOUR
        backend.index([doc])


DOCS = [FIRST] + _chores(30) + [TARGET] + _chores(40)[30:]


def _check(on: HybridBackend, off: HybridBackend) -> None:
    assert TARGET not in off.retrieve([QUERY], 5)[0]["docs"]
    found = on.retrieve([QUERY], 5)[0]["docs"]
    assert TARGET in found
    why = dict(zip(found, on.explain(QUERY, found)))
    assert why[TARGET]["thread_docs"] == 'thread #10 matches "rows", "count", "times" (2 docs)'
    assert "thread_docs" not in off.explain(QUERY, [TARGET])[0]


def test_hybrid_recalls_a_thread_mate_sharing_no_word_with_the_query(tmp_path):
    on = HybridBackend(tmp_path / "on", {"embedder": "hashing"})  # the default: on
    off = HybridBackend(tmp_path / "off", {"embedder": "hashing", "thread_docs": False})
    try:
        for backend in (on, off):
            _history(backend, DOCS)
        _check(on, off)
    finally:
        on.close()
        off.close()


def test_a_thread_mate_another_process_wrote_counts_at_the_next_query(tmp_path):
    """The threads follow the store, not this backend's own writes: a second backend on the
    same store (standing for another process) writes the doc that makes #10 a thread, and the
    first one's next retrieve finds it through the thread."""
    reader = HybridBackend(tmp_path / "s", {"embedder": "hashing", "thread_docs": True})
    writer = HybridBackend(tmp_path / "s", {"embedder": "hashing", "thread_docs": True})
    alone = TARGET.replace(" Issues: #10.", "")
    try:
        _history(reader, [FIRST] + _chores(30) + [alone])
        assert alone not in reader.retrieve([QUERY], 5)[0]["docs"]  # #10 is one doc: no thread
        writer.clock = lambda: START
        writer.index([TARGET])
        assert TARGET in reader.retrieve([QUERY], 5)[0]["docs"]
    finally:
        reader.close()
        writer.close()


def test_a_store_whose_docs_name_no_issue_ranks_as_without_threads(tmp_path):
    """On by default costs nothing in ranking where nothing names an issue (LoCoMo, MuSiQue, a
    project whose tickets cite none): the same docs, the same order, the same explain signals."""
    plain = [d.replace(" Issues: #10.", "").replace("#", "") for d in DOCS]
    assert all("#" not in d for d in plain)
    on = HybridBackend(tmp_path / "on", {"embedder": "hashing"})
    off = HybridBackend(tmp_path / "off", {"embedder": "hashing", "thread_docs": False})
    try:
        for backend in (on, off):
            _history(backend, plain)
        for query in (QUERY, "chore", "rows foreign keys"):
            got, want = on.retrieve([query], 8)[0]["docs"], off.retrieve([query], 8)[0]["docs"]
            assert got == want and got
            assert on.explain(query, got) == off.explain(query, got)
    finally:
        on.close()
        off.close()


def test_thread_docs_is_a_strict_option(tmp_path):
    with pytest.raises(Exception, match="thread_docs"):
        HybridBackend(tmp_path / "x", {"embedder": "hashing", "thread_docs": "sometimes"})


@pytest.mark.postgres
def test_hybrid_recalls_it_on_the_postgresql_store(tmp_path, pg_url):
    on = HybridBackend(tmp_path / "on", {"embedder": "hashing", "thread_docs": True},
                       database=MemoryDatabase(pg_url, "demo"))
    off = HybridBackend(tmp_path / "off", {"embedder": "hashing", "thread_docs": False},
                        database=MemoryDatabase(pg_url, "other"))
    try:
        for backend in (on, off):
            _history(backend, DOCS)
        _check(on, off)
    finally:
        on.close()
        off.close()
