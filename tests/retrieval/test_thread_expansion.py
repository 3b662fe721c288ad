"""The words a repository's own issue threads teach (backends/retrieval/expansion.py): with
thread_expansion, a stored doc that shares no word with the query is recalled when earlier
thread-mates taught that the query's words predict its words."""

from __future__ import annotations

import math

import pytest

from backends.hybrid import HybridBackend
from backends.retrieval import expansion, fusion
from orchestrator.plugin_api import MemoryDatabase

HOUR = 3600.0
START = 1_700_000_000.0

# Two earlier threads teach: a ticket about "count" and "timeout" has thread-mates about
# "inspect" and "foreign".
TAUGHT = [
    "Ticket: Row count times out on big tables. Changed: app/count.py. Issues: #10.",
    "Ticket: Foreign key inspect is slow. Changed: app/inspect.py. Issues: #10.",
    "Ticket: Show a timeout notice for the count. Changed: app/notice.py. Issues: #20.",
    "Ticket: Cache the inspect data of foreign tables. Changed: app/cache.py. Issues: #20.",
]
# The doc to find: it shares no word with the query and names no issue the query could know.
TARGET = "Ticket: Expand foreign references without inspect. Changed: app/expand.py."
QUERY = "Show many rows when the count times out"


def _chores(n: int) -> list[str]:
    return [f"Ticket: Chore {i}: bump the widget{i} pin. Changed: requirements{i}.txt" for i in range(n)]


def test_words_of_reads_content_words_without_issue_refs():
    assert expansion.words_of("Fix the Count (#12), see #3 and 42 rows!") == {"fix", "count", "rows", "see"}


def test_pairs_of_earlier_threads_teach_the_words_of_thread_mates():
    table = expansion.Associations()
    table.update("a", dict(enumerate(TAUGHT)))
    found = table.expand(QUERY)
    # "inspect" and "foreign": each seen with "count" in two pairs of docs (threads #10 and #20)
    assert found.terms[:2] == ["foreign", "inspect"]
    assert found.because["inspect"][0] in {"count", "times", "timeout"}
    assert "count" not in found.terms  # a query word is no expansion of itself
    # PMI over the weighted pairs, by hand: 4 docs, 2 threads of 2, every pair weighs 1/2
    joint = 1.0  # count -> inspect: (0 -> 1) and (2 -> 3), 1/2 each
    c_count = 1.0  # pairs whose first doc has "count": 0 -> 1, 2 -> 3
    c_inspect = 1.0
    total = 2.0
    assert math.log(joint * total / (c_count * c_inspect)) == pytest.approx(math.log(2))


def test_a_word_every_thread_mate_has_teaches_nothing():
    """"ticket" and "issues" are in every threaded doc: PMI log(1) = 0, which the weighted sums
    (pairs of 1/2 and 1/3) round to just above 0; it must not count as an association."""
    texts = {0: "Ticket: count timeout. Issues: #1.", 1: "Ticket: inspect foreign. Issues: #1.",
             2: "Ticket: count timeout. Issues: #2.", 3: "Ticket: inspect foreign. Issues: #2.",
             4: "Ticket: chore. Issues: #2."}
    table = expansion.Associations()
    table.update("a", texts)
    found = table.expand("count timeout rows")
    assert found.terms == ["foreign", "inspect"]


def test_one_pair_is_a_coincidence_and_teaches_nothing():
    table = expansion.Associations()
    table.update("a", dict(enumerate(TAUGHT[:2] + _chores(2))))
    assert table.expand(QUERY).terms == []  # count -> inspect seen in one pair only


def test_a_store_without_issue_refs_teaches_nothing_and_the_table_follows_the_store():
    table = expansion.Associations()
    table.update("a", dict(enumerate(_chores(5))))
    assert table.expand(QUERY).terms == []
    texts = dict(enumerate(TAUGHT))
    table.update("b", texts)
    assert "inspect" in table.expand(QUERY).terms
    texts[1] = "Ticket: nothing here. Issues: #10."  # an edit: the doc's words are read again
    texts[3] = "Ticket: nothing either. Issues: #20."
    table.update("c", texts)
    assert "inspect" not in table.expand(QUERY).terms


def test_fuse_many_with_two_lists_is_fuse():
    dense = [(1, 0.9), (2, 0.5), (3, 0.1)]
    sparse = [(3, 7.0), (4, 2.0), (1, 1.0)]
    for method in ("weighted", "relative", "rrf"):
        many = fusion.fuse_many(method, [(0.5, dense), (0.5, sparse)])
        two = fusion.fuse(method, dense, sparse, 0.5)
        assert [i for i, _ in many] == [i for i, _ in two]
        assert [s for _, s in many] == pytest.approx([s for _, s in two])


def _history(backend: HybridBackend, docs: list[str]) -> None:
    now = [START]
    backend.clock = lambda: now[0]
    for i, doc in enumerate(docs):  # one ticket an hour, oldest first
        now[0] = START + i * HOUR
        backend.index([doc])


DOCS = TAUGHT + _chores(30) + [TARGET] + _chores(40)[30:]


def _check(on: HybridBackend, off: HybridBackend) -> None:
    assert TARGET not in off.retrieve([QUERY], 5)[0]["docs"]
    found = on.retrieve([QUERY], 5)[0]["docs"]
    assert TARGET in found
    why = dict(zip(found, on.explain(QUERY, found)))
    assert why[TARGET]["thread_words"].startswith('thread words: matches "foreign", "inspect" '
                                                  "(words the issue thread-mates of earlier tickets with")
    assert "thread_words" not in off.explain(QUERY, [TARGET])[0]


def test_hybrid_recalls_a_doc_sharing_no_word_with_the_query(tmp_path):
    on = HybridBackend(tmp_path / "on", {"embedder": "hashing", "thread_expansion": True, "thread_docs": False})
    off = HybridBackend(tmp_path / "off", {"embedder": "hashing", "thread_docs": False})  # the try alone
    try:
        for backend in (on, off):
            _history(backend, DOCS)
        _check(on, off)
    finally:
        on.close()
        off.close()


def test_only_stored_docs_teach_a_later_thread_mate_is_not_read(tmp_path):
    """What the table learns comes from the docs stored when the query runs: the second pair
    of a thread, stored after the query, is not known to it."""
    on = HybridBackend(tmp_path / "on", {"embedder": "hashing", "thread_expansion": True, "thread_docs": False})
    try:
        _history(on, TAUGHT[:2] + _chores(30) + [TARGET])
        assert TARGET not in on.retrieve([QUERY], 5)[0]["docs"]  # one pair: nothing learned
        on.index(TAUGHT[2:])  # the second pair arrives: the table follows the store
        assert TARGET in on.retrieve([QUERY], 5)[0]["docs"]
    finally:
        on.close()


def test_a_thread_another_process_wrote_counts_at_the_next_query(tmp_path):
    """The table follows the store, not this backend's own writes: a second backend on the same
    store (standing for another process) writes the second pair, and the first one's next
    retrieve has learned from it."""
    reader = HybridBackend(tmp_path / "s", {"embedder": "hashing", "thread_expansion": True, "thread_docs": False})
    writer = HybridBackend(tmp_path / "s", {"embedder": "hashing", "thread_expansion": True, "thread_docs": False})
    try:
        _history(reader, TAUGHT[:2] + _chores(30) + [TARGET])
        assert TARGET not in reader.retrieve([QUERY], 5)[0]["docs"]
        writer.clock = lambda: START
        writer.index(TAUGHT[2:])
        assert TARGET in reader.retrieve([QUERY], 5)[0]["docs"]
    finally:
        reader.close()
        writer.close()


def test_thread_expansion_is_a_strict_option(tmp_path):
    with pytest.raises(Exception, match="thread_expansion"):
        HybridBackend(tmp_path / "x", {"embedder": "hashing", "thread_expansion": "sometimes"})


@pytest.mark.postgres
def test_hybrid_recalls_it_on_the_postgresql_store(tmp_path, pg_url):
    on = HybridBackend(tmp_path / "on", {"embedder": "hashing", "thread_expansion": True, "thread_docs": False},
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
