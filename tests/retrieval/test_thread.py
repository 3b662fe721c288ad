"""Work comes in threads (backends/retrieval/thread.py): when a ticket continues recent work,
hybrid weighs a doc's place in time (counted in docs) with its relevance, so the thread's
older tickets, just past the recent window, become candidates and rank above older work that
matches as well; a query that continues no thread is ranked by relevance alone."""

from __future__ import annotations

from backends.hybrid import HybridBackend
from backends.retrieval import thread

HOUR = 3600.0
START = 1_700_000_000.0


def test_the_thread_reorders_only_a_query_that_continues_recent_work():
    fused = [(1, 1.0), (2, 0.9), (3, 0.5)]  # 1 is 200 docs back, 2 30 back, 3 the newest
    newest = [3, 10, 11] + list(range(100, 127)) + [2] + list(range(200, 369)) + [1]
    assert newest.index(2) == 30 and newest.index(1) == 200
    blended = thread.blend(fused, newest, pool=3, weight=0.3, scale=40)
    ids = [doc for doc, _ in blended]
    assert ids.index(2) < ids.index(1)  # nearly as relevant and 170 docs nearer: first
    assert {10, 11} <= set(ids)  # the newest work joins the candidates
    old_only = [(1, 1.0), (250, 0.8)]  # its best matches are all older than 40 docs
    assert thread.blend(old_only, newest + [250], pool=3, weight=0.3, scale=40) == old_only
    assert thread.blend(fused, newest, pool=3, weight=0.0, scale=40) == fused


def test_a_place_counts_less_the_more_docs_are_newer():
    assert thread.place_weight(0, 40) == 1.0
    assert thread.place_weight(40, 40) < thread.place_weight(20, 40) < thread.place_weight(0, 40)
    assert thread.place_weight(None, 40) == 0.0  # beyond the reach read


def _history(backend: HybridBackend, docs: list[str]) -> None:
    now = [START]
    backend.clock = lambda: now[0]
    for i, doc in enumerate(docs):  # one ticket an hour, oldest first
        now[0] = START + i * HOUR
        backend.index([doc])


def _thread_history() -> tuple[list[str], str, str]:
    far = "Ticket: Facet counts for columns. Changed: app/facets.py"
    near = "Ticket: Facet counts for columns, sorted by count. Changed: app/facets.py, app/views.py"
    chores = [f"Ticket: Chore {i}: bump the widget{i} pin. Changed: requirements{i}.txt"
              for i in range(150)]
    recent = ["Ticket: Facet toggling keeps the columns selected. Changed: app/facets.py",
              "Ticket: Facet results say when they are truncated. Changed: app/facets.py"]
    # far: 131 tickets before near; near: 20 chores before the thread's newest two.
    return [far] + chores[:130] + [near] + chores[130:] + recent, far, near


def test_hybrid_ranks_the_threads_older_ticket_above_older_work_that_matches_as_well(tmp_path):
    docs, far, near = _thread_history()
    query = "Facet counts for columns keep their order when toggled"
    on = HybridBackend(tmp_path / "on", {"embedder": "hashing", "thread_weight": 0.3})
    off = HybridBackend(tmp_path / "off", {"embedder": "hashing", "thread_weight": 0})
    try:
        for backend in (on, off):
            _history(backend, docs)
        ranked_off = off.retrieve([query], 10)[0]["docs"]
        ranked_on = on.retrieve([query], 10)[0]["docs"]
        assert ranked_off.index(far) < ranked_off.index(near)  # by relevance alone
        assert ranked_on.index(near) < ranked_on.index(far)  # the thread's
        why = dict(zip(ranked_on, on.explain(query, ranked_on)))
        assert why[near]["recency"].startswith("thread: 22 newer doc(s)")  # 20 chores, 2 recent
        assert why[far]["recency"].startswith("thread: 153 newer doc(s), its place counted 0.01")
    finally:
        on.close()
        off.close()


def test_hybrid_ranks_a_question_about_any_time_by_relevance_alone(tmp_path):
    docs, far, _ = _thread_history()
    query = "Which ticket bumped the widget3 pin in requirements3.txt?"  # old work, no thread
    on = HybridBackend(tmp_path / "on", {"embedder": "hashing", "thread_weight": 0.3})
    off = HybridBackend(tmp_path / "off", {"embedder": "hashing", "thread_weight": 0})
    try:
        for backend in (on, off):
            _history(backend, docs)
        assert on.retrieve([query], 10)[0] == off.retrieve([query], 10)[0]
        assert "recency" not in on.explain(query, [far])[0]
    finally:
        on.close()
        off.close()


def test_an_issue_the_ticket_names_threads_to_the_docs_that_name_it(tmp_path):
    """The only use of issue numbers: the words of the ticket's own text (`#1234` is the word
    1234 to BM25), never the benchmark's refs (docs/memory-benchmarks.md)."""
    docs = [f"Ticket: Chore {i}: tidy module{i}. Changed: pkg/module{i}.py" for i in range(30)]
    docs.insert(3, "Ticket: Paginate the export, refs #1234. Changed: pkg/export.py")
    backend = HybridBackend(tmp_path / "h", {"embedder": "hashing"})
    try:
        _history(backend, docs)
        (result,) = backend.retrieve(["Follow-up to #1234: stream the rows"], 3)
        assert result["docs"][0] == docs[3]
    finally:
        backend.close()
