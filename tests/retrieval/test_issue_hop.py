"""Work comes in issue threads (backends/retrieval/issues.py): with issue_hop, a stored doc that
names an issue one of the query's best matches names is recalled beside it, though it shares no
word with the query."""

from __future__ import annotations

import pytest

from backends.hybrid import HybridBackend
from backends.retrieval import issues
from orchestrator.plugin_api import MemoryDatabase

HOUR = 3600.0
START = 1_700_000_000.0

MATCH = "Ticket: Table view no longer reads the inspect data. Changed: app/views/table.py. Issues: #418."
MATE = "Ticket: Sortable columns computed on demand. Changed: app/sort.py. Issues: #418."
OTHER = "Ticket: Sortable widgets get a border. Changed: app/widgets.css. Issues: #4180."
QUERY = "Stop reading inspect data in the table view"


def test_issues_of_reads_the_issues_a_doc_names():
    assert issues.issues_of(MATCH) == {418}
    assert issues.issues_of("Refs #12, #40 and (#7).") == {12, 40, 7}
    # an HTML entity, a URL fragment, a word's tail and a bare number are no issue
    assert issues.issues_of("&#123; page#2 abc#3 see 5 and x/#9") == frozenset()
    # at the text's start and after a line break; `##5` and a tail of ten digits are no issue
    assert issues.issues_of("#1 x\n#14 ##5 #1234567890 é#7 _#8 #10,#11") == {1, 14, 10, 11}


def test_issues_of_finds_what_the_look_behind_pattern_finds():
    # issues_of starts from each `#` for speed; it must read exactly as the look-behind does
    import random

    rng = random.Random(7)
    texts = ["".join(rng.choice("ab#1&/_ é9\n(.") for _ in range(60)) for _ in range(3000)]
    for text in texts:
        assert issues.issues_of(text) == {int(m.group(1)) for m in issues._ISSUE.finditer(text)}, text


def test_the_hop_list_joins_the_fused_one_by_reciprocal_rank():
    fused = [(1, 1.0), (2, 0.5), (3, 0.4)]
    texts = {1: "a. Issues: #5.", 2: "b.", 3: "c. Issues: #6."}
    stored = {5: [(9, "mate. Issues: #5."), (1, "a. Issues: #5."), (8, "no. Issues: #50.")],
              6: [(3, "c. Issues: #6.")]}
    ranked, why = issues.hop(fused, 2, texts, lambda issue: stored.get(issue, []))
    order = [i for i, _ in ranked]
    # 9 is first in the hop list (lent by the first match); 1 is first in the fused list
    assert order[:2] == [1, 9] and set(order) == {1, 2, 3, 9}
    assert 8 not in order  # "#50" is not "#5": the store's substring match is confirmed
    assert why == {9: (1, 5)}  # only the first k=2 lend: 3's issue #6 is not followed
    assert ranked[0][1] == pytest.approx((1 / 61) / (2 / 61))
    assert issues.hop(fused, 2, {1: "a.", 2: "b."}, lambda issue: []) == (fused, {})


def _history(backend: HybridBackend, docs: list[str]) -> None:
    now = [START]
    backend.clock = lambda: now[0]
    for i, doc in enumerate(docs):  # one ticket an hour, oldest first
        now[0] = START + i * HOUR
        backend.index([doc])


def _docs() -> list[str]:
    chores = [f"Ticket: Chore {i}: bump the widget{i} pin. Changed: requirements{i}.txt"
              for i in range(40)]
    return chores[:10] + [MATE] + chores[10:25] + [OTHER, MATCH] + chores[25:]


def _check(on: HybridBackend, off: HybridBackend) -> None:
    ranked_off = off.retrieve([QUERY], 2)[0]["docs"]
    ranked_on = on.retrieve([QUERY], 2)[0]["docs"]
    assert ranked_off[0] == MATCH and MATE not in ranked_off
    assert ranked_on == [MATCH, MATE]
    why = dict(zip(ranked_on, on.explain(QUERY, ranked_on)))
    assert why[MATE]["issue"] == ('issue: names #418, as does the match ranked 1 ("Ticket: Table '
                                  'view no longer reads the inspect data. Changed")')
    assert "issue" not in why[MATCH] and "issue" not in off.explain(QUERY, ranked_on)[1]


def test_hybrid_recalls_the_thread_mate_of_a_strong_match(tmp_path):
    on = HybridBackend(tmp_path / "on", {"embedder": "hashing", "issue_hop": True, "thread_docs": False})
    off = HybridBackend(tmp_path / "off", {"embedder": "hashing", "thread_docs": False})  # the try alone
    try:
        for backend in (on, off):
            _history(backend, _docs())
        _check(on, off)
    finally:
        on.close()
        off.close()


def test_a_mate_another_process_wrote_counts_at_the_next_query(tmp_path):
    """Nothing is derived and kept: a second backend on the same store (standing for another
    process) writes the mate, and the first one's next retrieve finds it."""
    reader = HybridBackend(tmp_path / "s", {"embedder": "hashing", "issue_hop": True, "thread_docs": False})
    writer = HybridBackend(tmp_path / "s", {"embedder": "hashing", "issue_hop": True, "thread_docs": False})
    try:
        _history(reader, [d for d in _docs() if d != MATE])
        assert MATE not in reader.retrieve([QUERY], 2)[0]["docs"]
        writer.clock = lambda: START
        writer.index([MATE])
        assert reader.retrieve([QUERY], 2)[0]["docs"] == [MATCH, MATE]
    finally:
        reader.close()
        writer.close()


def test_issue_hop_is_a_strict_option(tmp_path):
    with pytest.raises(Exception, match="issue_hop"):
        HybridBackend(tmp_path / "x", {"embedder": "hashing", "issue_hop": "sometimes"})


@pytest.mark.postgres
def test_hybrid_recalls_the_thread_mate_on_the_postgresql_store(tmp_path, pg_url):
    on = HybridBackend(tmp_path / "on", {"embedder": "hashing", "issue_hop": True, "thread_docs": False},
                       database=MemoryDatabase(pg_url, "demo"))
    off = HybridBackend(tmp_path / "off", {"embedder": "hashing", "thread_docs": False},
                        database=MemoryDatabase(pg_url, "other"))
    try:
        for backend in (on, off):
            _history(backend, _docs())
        _check(on, off)
    finally:
        on.close()
        off.close()
