"""dense / bm25 / hybrid behaviour beyond the contract: ranking, stages, metadata, bad input."""

from __future__ import annotations

import pytest

from backends.bm25 import Bm25Backend
from backends.dense import DenseBackend
from backends.hybrid import HybridBackend
from backends.retrieval import MemoryRecord
from orchestrator.plugin_api import ConfigError

DAY = 86400.0


def hybrid(tmp_path, **options):
    return HybridBackend(tmp_path / "h", {"embedder": "hashing", **options})


def test_bm25_needs_no_embedder_and_ranks_by_keywords(tmp_path):
    backend = Bm25Backend(tmp_path)
    assert backend.embedder is None
    backend.index(["The upload queue stalls on large files", "Billing report rounding fixed",
                   "Queue workers restarted nightly"])
    (result,) = backend.retrieve(["uploads stalling in the queue"], 3)
    assert result["docs"][0] == "The upload queue stalls on large files"
    assert result["docs"][-1] == "Queue workers restarted nightly"
    # Only stop words: they are searched as they are rather than dropped to nothing.
    assert backend.retrieve(["the of and"], 3)[0]["docs"] == ["The upload queue stalls on large files"]
    backend.close()


def test_hybrid_finds_what_only_one_side_finds(tmp_path):
    backend = HybridBackend(tmp_path)  # the real MiniLM: meaning, plus FTS5: rare tokens
    backend.index(["Fixed the WiFi dropouts by moving the router off channel 13",
                   "Error code QX-4471 came from the payment gateway's sandbox",
                   "Lunch order for the offsite"])
    by_meaning = backend.retrieve(["wireless network keeps disconnecting"], 1)[0]["docs"]
    by_token = backend.retrieve(["what is QX-4471"], 1)[0]["docs"]
    assert by_meaning == ["Fixed the WiFi dropouts by moving the router off channel 13"]
    assert by_token == ["Error code QX-4471 came from the payment gateway's sandbox"]
    backend.close()


def test_recency_favours_the_newer_of_two_equal_memories(tmp_path):
    backend = hybrid(tmp_path, recency_weight=0.5)
    now = backend.clock()
    backend.index_records([MemoryRecord("deploy checklist v1 zz", timestamp=now - 90 * DAY),
                           MemoryRecord("deploy checklist v2 zz", timestamp=now - DAY)])
    docs = backend.retrieve(["deploy checklist zz"], 2)[0]["docs"]
    assert docs == ["deploy checklist v2 zz", "deploy checklist v1 zz"]
    # thread_weight 0: the thread's place in time (test_thread.py) would part the two too.
    flat = hybrid(tmp_path / "flat", recency_weight=0.0, thread_weight=0)
    flat.index_records([MemoryRecord("deploy checklist v2 zz", timestamp=now - DAY),
                        MemoryRecord("deploy checklist v1 zz", timestamp=now - 90 * DAY)])
    assert flat.retrieve(["deploy checklist zz"], 2)[0]["doc_scores"][0] == pytest.approx(
        flat.retrieve(["deploy checklist zz"], 2)[0]["doc_scores"][1])
    backend.close()
    flat.close()


def test_importance_lifts_a_critical_memory(tmp_path):
    backend = hybrid(tmp_path, recency_weight=0.0)
    backend.index_records([MemoryRecord("cache layer note alpha", importance=1),
                           MemoryRecord("cache layer note beta", importance=5)])
    assert backend.retrieve(["cache layer note"], 2)[0]["docs"][0] == "cache layer note beta"
    backend.close()


def test_near_duplicate_updates_the_existing_memory(tmp_path):
    backend = hybrid(tmp_path, dedup_threshold=0.85)
    backend.index(["The deploy script retries three times before giving up"])
    backend.index(["The deploy script retries three times before giving up.",
                   "Unrelated: the billing report is rounded to cents"])
    assert backend.list_docs() == ["The deploy script retries three times before giving up.",
                                   "Unrelated: the billing report is rounded to cents"]
    assert [row["importance"] for row in backend.stats()] == [4, 3]  # the merged one bumped
    assert backend.delete(["The deploy script retries three times before giving up"]) == 0
    backend.close()


def test_retrieval_counts_accesses(tmp_path):
    backend = hybrid(tmp_path)
    backend.index(["alpha memory", "beta memory", "gamma note"])
    backend.retrieve(["alpha memory"], 1)
    backend.retrieve(["alpha memory", "beta memory"], 1)
    stats = {row["text"]: row for row in backend.stats()}
    assert stats["alpha memory"]["access_count"] == 2
    assert stats["beta memory"]["access_count"] == 1
    assert stats["gamma note"]["access_count"] == 0 and stats["gamma note"]["last_accessed"] is None
    backend.close()


@pytest.mark.parametrize("cls", [Bm25Backend, DenseBackend, HybridBackend])
def test_control_characters_and_empty_docs_round_trip(tmp_path, cls):
    options = {} if cls is Bm25Backend else {"embedder": "hashing"}
    if cls is HybridBackend:  # the thread's place in time (test_thread.py) would part the tie
        options["thread_weight"] = 0
    backend = cls(tmp_path, options)
    odd = ["nul \x00 bell \x07 escape \x1b[31m red", "", "   ", "tab\tand\r\nnewlines"]
    backend.index(odd)
    assert backend.list_docs() == odd
    assert backend.retrieve([odd[0]], 1)[0]["docs"] == [odd[0]]
    empty = backend.retrieve([""], 3)[0]
    if cls is Bm25Backend:
        assert empty["docs"] == []  # no words, so nothing matches
    else:  # an empty query's vector is near nothing: every doc ties, three come back
        assert len(empty["docs"]) == 3 and set(empty["docs"]) <= set(odd)
        assert len(set(empty["doc_scores"])) == 1
    assert backend.delete(["", "   "]) == 2
    backend.close()


def test_bad_records_are_refused_before_anything_is_written(tmp_path):
    backend = hybrid(tmp_path)
    with pytest.raises(ValueError, match="importance"):
        backend.index_records([MemoryRecord("ok"), MemoryRecord("bad", importance=9)])
    with pytest.raises(ValueError, match="timestamp"):
        backend.index_records([MemoryRecord("bad", timestamp=float("nan"))])
    with pytest.raises(TypeError):
        backend.retrieve("not a list", 3)
    assert backend.list_docs() == []
    backend.close()


def test_unknown_option_is_a_config_error_naming_the_backend(tmp_path):
    with pytest.raises(ConfigError, match="hybrid"):
        HybridBackend(tmp_path, {"fusion_method": "rrf"})
    with pytest.raises(ConfigError, match="unknown embedder"):
        DenseBackend(tmp_path, {"embedder": "word2vec"})


def test_hybrid_embeds_a_querys_prose_and_matches_its_paths_with_bm25(tmp_path):
    """A per-turn query names the files Claude Code changed: the dense half reads the prose (a
    list of paths looks alike to a sentence embedder whatever files it names), BM25 the paths."""
    docs = ["Ticket: Link URLs in table cells. Changed: datasette/utils.py, tests/test_utils.py",
            "Ticket: Refactor the filter logic. Changed: datasette/app.py, datasette/views/table.py",
            "Ticket: Faster CSV export of large tables"]
    turn = "Link URLs in cells\nChanged datasette/app.py, datasette/views/table.py"
    dense_only = hybrid(tmp_path / "d", dense_weight=1.0, recency_weight=0)
    dense_only.index(docs)
    with_paths, prose = dense_only.retrieve([turn, "Link URLs in cells\nChanged"], 3)
    assert with_paths["docs"] == prose["docs"] and with_paths["doc_scores"] == prose["doc_scores"]
    bm25_only = hybrid(tmp_path / "b", dense_weight=0.0, recency_weight=0)
    bm25_only.index(docs)
    (by_path,) = bm25_only.retrieve(["Changed datasette/views/table.py"], 1)
    assert by_path["docs"] == [docs[1]]
    for backend in (dense_only, bm25_only):
        backend.close()


@pytest.mark.parametrize("text,expected", [
    ("Fix it\nChanged datasette/app.py, docs/{a.rst => b.rst}, setup.py", "Fix it\nChanged"),
    ("Crash in table.py when _sort is set; see setup.py.", "Crash in when _sort is set; see"),
    ("Changed .travis.yml, docs/index.rst", "Changed"),
    ("datasette/app.py, tests/test_api.py", "datasette/app.py, tests/test_api.py"),  # paths only: kept
    ("What did Caroline say on 5/8/2023 and/or later?", "What did Caroline say on 5/8/2023 and/or later?"),
    ("TCP/IP errors in the v1.2 release", "TCP/IP errors in the v1.2 release"),
])
def test_without_paths_keeps_the_prose(text, expected):
    import re

    from backends.retrieval.bm25 import without_paths

    assert re.findall(r"\w+", without_paths(text)) == re.findall(r"\w+", expected)


@pytest.mark.parametrize("text,paths_only", [
    ("app/export.py", True),
    ("datasette/app.py, tests/test_api.py", True),
    (".travis.yml", True),
    ("Changed .travis.yml", False),
    ("Carol", False),
    ("", False),
    ("1/2", False),
])
def test_names_only_paths(text, paths_only):
    from backends.retrieval.bm25 import names_only_paths

    assert names_only_paths(text) is paths_only
