"""Work comes in bursts (backends/retrieval/burst.py): with burst_weight, a strong match lends
part of its score to the docs near it in time that name one of its files, so a commit of an old
burst that shares no word with the query is recalled beside the one that matched."""

from __future__ import annotations

import pytest

from backends.hybrid import HybridBackend
from backends.retrieval import burst
from orchestrator.plugin_api import MemoryDatabase

HOUR = 3600.0
START = 1_700_000_000.0

MATCH = "Ticket: Table view no longer reads the inspect data. Changed: app/views/table.py, app/loader.py"
MATE = "Ticket: Sortable columns computed on demand. Changed: app/loader.py, app/utils.py"
BESIDE = "Ticket: Sortable widgets get a border. Changed: app/widgets.css"  # as near, no shared file
QUERY = "Stop reading inspect data in the table view"


def test_paths_of_reads_the_files_a_doc_names():
    assert burst.paths_of(MATCH) == {"app/views/table.py", "app/loader.py"}
    assert burst.paths_of("Fixed it. See setup.py.") == {"setup.py"}
    assert burst.paths_of("and/or TCP/IP on 5/8/2023") == frozenset()


def test_a_match_lends_to_the_mates_that_share_a_file_and_adds_up():
    fused = [(1, 1.0), (2, 0.5), (3, 0.4)]
    texts = {1: "a. Changed: x/a.py", 2: "b. Changed: x/a.py", 3: "c. Changed: y/c.py"}
    around = {1: [(7, 1, "mate. Changed: x/a.py"), (8, 1, "other. Changed: z/z.py")],
              2: [(7, 2, "mate. Changed: x/a.py")]}
    ranked, why = burst.lend(fused, around, texts, 0.2)
    scores = dict(ranked)
    assert scores[7] == 0.2 * 1.0 + 0.2 * 0.5  # lent by both matches it sits beside
    assert 8 not in scores  # beside a match, but names none of its files
    assert scores[3] == 0.4  # nobody lent to it
    assert why[7] == (1, 1, "x/a.py")  # its largest lender
    assert burst.lend(fused, around, texts, 0.0) == (fused, {})


def _history(backend: HybridBackend, docs: list[str]) -> None:
    now = [START]
    backend.clock = lambda: now[0]
    for i, doc in enumerate(docs):  # one ticket an hour, oldest first
        now[0] = START + i * HOUR
        backend.index([doc])


def _docs() -> list[str]:
    chores = [f"Ticket: Chore {i}: bump the widget{i} pin. Changed: requirements{i}.txt"
              for i in range(40)]
    return chores[:10] + [MATCH, BESIDE, MATE] + chores[10:]


def _check(on: HybridBackend, off: HybridBackend) -> None:
    ranked_off = off.retrieve([QUERY], 2)[0]["docs"]
    ranked_on = on.retrieve([QUERY], 2)[0]["docs"]
    assert ranked_off[0] == MATCH and MATE not in ranked_off
    assert ranked_on == [MATCH, MATE]
    why = dict(zip(ranked_on, on.explain(QUERY, ranked_on)))
    assert why[MATE]["burst"].startswith("burst: 2 doc(s) from a strong match that also names "
                                         "app/loader.py (lent ")
    assert "burst" not in why[MATCH] and "burst" not in off.explain(QUERY, ranked_on)[1]


def test_hybrid_recalls_the_burst_mate_of_a_strong_match(tmp_path):
    on = HybridBackend(tmp_path / "on", {"embedder": "hashing", "burst_weight": 0.5})
    off = HybridBackend(tmp_path / "off", {"embedder": "hashing"})  # the default: off
    try:
        for backend in (on, off):
            _history(backend, _docs())
        _check(on, off)
    finally:
        on.close()
        off.close()


def test_a_mate_another_process_wrote_counts_at_the_next_query(tmp_path):
    """Nothing is derived and kept: a second backend on the same store (standing for another
    process) writes the mate, and the first one's next retrieve lends to it."""
    reader = HybridBackend(tmp_path / "s", {"embedder": "hashing", "burst_weight": 0.5})
    writer = HybridBackend(tmp_path / "s", {"embedder": "hashing", "burst_weight": 0.5})
    try:
        docs = _docs()
        _history(reader, docs[:12])  # up to BESIDE: the mate is not written yet
        assert MATE not in reader.retrieve([QUERY], 2)[0]["docs"]
        writer.clock = lambda: START + 12 * HOUR
        writer.index([MATE])
        assert reader.retrieve([QUERY], 2)[0]["docs"] == [MATCH, MATE]
    finally:
        reader.close()
        writer.close()


@pytest.mark.postgres
def test_hybrid_recalls_the_burst_mate_on_the_postgresql_store(tmp_path, pg_url):
    database = MemoryDatabase(pg_url, "demo")
    on = HybridBackend(tmp_path / "on", {"embedder": "hashing", "burst_weight": 0.5},
                       database=database)
    off = HybridBackend(tmp_path / "off", {"embedder": "hashing"},
                        database=MemoryDatabase(pg_url, "other"))
    try:
        for backend in (on, off):
            _history(backend, _docs())
        _check(on, off)
    finally:
        on.close()
        off.close()
