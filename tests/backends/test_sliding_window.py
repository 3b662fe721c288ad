"""Behaviour of the sliding_window backend beyond the contract: window, chain, status, summaries."""

from __future__ import annotations

import logging
import sqlite3
import threading

import pytest

from backends.sliding_window import (
    SlidingWindowBackend,
    SlidingWindowOptions,
    doc_window,
    window_range,
)
from orchestrator.errors import ConfigError


class FakeLLM:
    """Records every call; replies `summary #n`; can hold calls from number `block_from` on."""

    def __init__(self, block_from: int | None = None, fail: bool = False):
        self.calls: list[tuple[str, str]] = []
        self.block_from = block_from
        self.fail = fail
        self.release = threading.Event()
        self.entered = threading.Event()

    def complete(self, system: str, prompt: str, max_tokens: int = 1024) -> str:
        self.calls.append((system, prompt))
        n = len(self.calls)
        if self.block_from is not None and n >= self.block_from:
            self.entered.set()
            assert self.release.wait(30), "test never released the fake LLM"
        if self.fail:
            raise RuntimeError("model is down")
        return f"summary #{n}"


def open_backend(tmp_path, llm=None, **opts) -> SlidingWindowBackend:
    opts.setdefault("background", False)
    return SlidingWindowBackend(tmp_path / "store", SlidingWindowOptions(**opts), llm)


def play(backend, conversation_id: str, rounds, start: int = 1) -> None:
    for r in range(start, start + rounds):
        backend.observe_round(conversation_id, f"prompt-{r}-text. More detail {r}.",
                              f"response-{r}-text. More detail {r}.")


def spans(rows):
    return [(r["start_sequence"], r["end_sequence"]) for r in rows]


@pytest.fixture
def closing():
    opened = []
    yield opened.append
    for backend in opened:
        backend.close()


@pytest.mark.parametrize(
    "last_seq, expected", [(5, (0, 5)), (13, (0, 13)), (15, (2, 15)), (19, (6, 19))]
)
def test_window_table_of_seed_004(last_seq, expected):
    assert window_range(last_seq, 14) == expected


def test_odd_window_start_is_bumped_to_even():
    assert window_range(16, 14) == (4, 16)  # 16 - 14 + 1 = 3 → 4
    assert window_range(7, 5) == (4, 7)  # 3 → 4: the response at seq 3 is not kept alone


def test_doc_window_counts_docs_not_seqs():
    assert doc_window([0, 1, 3, 4, 6], 3) == (3, 6)
    assert doc_window([2], 3) == (2, 2)


def test_summary_starts_at_the_threshold(tmp_path, closing):
    backend = open_backend(tmp_path)
    closing(backend)
    play(backend, "t1", 2)  # last seq 3 < 5
    assert backend.summaries("t1") == []
    play(backend, "t1", 1, start=3)  # last seq 5
    (row,) = backend.summaries("t1")
    assert (row["start_sequence"], row["end_sequence"], row["status"]) == (0, 5, "completed")
    assert row["base_memory_id"] is None

    later = open_backend(tmp_path / "other", summarize_after_seq=7)
    closing(later)
    play(later, "t1", 3)
    assert later.summaries("t1") == []
    play(later, "t1", 1, start=4)
    assert spans(later.summaries("t1")) == [(0, 7)]


def test_version_chain_slides_and_records_generation_time(tmp_path, closing):
    backend = open_backend(tmp_path)
    closing(backend)
    play(backend, "t1", 10)
    rows = backend.summaries("t1")
    assert spans(rows) == [(0, 5), (0, 7), (0, 9), (0, 11), (0, 13), (2, 15), (4, 17), (6, 19)]
    assert [r["base_memory_id"] for r in rows] == [None] + [r["memory_id"] for r in rows[:-1]]
    assert all(r["status"] == "completed" for r in rows)
    times = [r["generation_time_ms"] for r in rows]
    assert all(isinstance(ms, int) and ms >= 0 for ms in times)


def test_no_second_summary_while_one_is_processing(tmp_path, closing):
    llm = FakeLLM(block_from=1)
    backend = open_backend(tmp_path, llm, background=True)
    closing(backend)
    play(backend, "t1", 3)
    assert llm.entered.wait(30)
    play(backend, "t1", 1, start=4)  # arrives while the first summary still runs → skipped
    rows = backend.summaries("t1")
    assert [(r["status"], r["end_sequence"]) for r in rows] == [("processing", 5)]
    ctx = backend.conversation_context("t1")
    assert ctx.summary is None and [m["seq"] for m in ctx.gap_messages] == list(range(8))

    llm.release.set()
    backend.flush()
    ctx = backend.conversation_context("t1")
    assert ctx.summary == "summary #1"
    assert ctx.gap_messages == [
        {"seq": 6, "role": "prompt", "text": "prompt-4-text. More detail 4."},
        {"seq": 7, "role": "response", "text": "response-4-text. More detail 4."},
    ]
    play(backend, "t1", 1, start=5)
    backend.flush()
    first, second = backend.summaries("t1")
    assert (second["start_sequence"], second["end_sequence"]) == (0, 9)
    assert second["base_memory_id"] == first["memory_id"] and second["status"] == "completed"


def test_stale_processing_row_counts_as_failed(tmp_path, closing):
    llm = FakeLLM(block_from=1)
    backend = open_backend(tmp_path, llm, background=True, processing_timeout_s=60)
    closing(backend)
    play(backend, "t1", 3)
    assert llm.entered.wait(30)
    # Age the stuck row past processing_timeout_s, as if its process had died long ago.
    with sqlite3.connect(tmp_path / "store" / "sliding_window.sqlite3") as conn:
        conn.execute("UPDATE memory SET created_at = created_at - 3600")
    llm.block_from = None  # the next summary goes through
    play(backend, "t1", 1, start=4)
    llm.release.set()
    backend.flush()
    first, second = backend.summaries("t1")
    assert first["status"] == "failed", "the stuck row is failed, and its late result dropped"
    assert first["memory_text"] == ""
    assert second["status"] == "completed" and second["end_sequence"] == 7
    assert second["base_memory_id"] is None


def test_incremental_prompt_has_previous_summary_and_only_new_messages(tmp_path, closing):
    llm = FakeLLM()
    backend = open_backend(tmp_path, llm)
    closing(backend)
    play(backend, "t1", 3)
    _, first = llm.calls[0]
    assert "no previous summary" in first
    assert all(f"prompt-{r}-text" in first for r in (1, 2, 3))

    play(backend, "t1", 1, start=4)
    _, second = llm.calls[1]
    assert "summary #1" in second
    assert "prompt-4-text" in second and "response-4-text" in second
    assert not any(f"-{r}-text" in second for r in (1, 2, 3)), "old messages must not be resent"

    play(backend, "t1", 4, start=5)  # up to seq 15: the window starts at 2
    _, last = llm.calls[-1]
    assert "seq >= 2" in last and "prompt-8-text" in last and "prompt-7-text" not in last
    assert backend.conversation_context("t1").summary == f"summary #{len(llm.calls)}"


def test_offline_extractive_summary_is_deterministic_and_windowed(tmp_path, closing):
    a, b = open_backend(tmp_path / "a"), open_backend(tmp_path / "b")
    closing(a)
    closing(b)
    for backend in (a, b):
        play(backend, "t1", 3)
    summary = a.conversation_context("t1").summary
    assert summary == b.conversation_context("t1").summary
    assert "[0 prompt] prompt-1-text." in summary and "[5 response] response-3-text." in summary
    assert "More detail" not in summary, "only the first sentence of each message is kept"

    play(a, "t1", 5, start=4)  # seq 15: the window starts at 2, round 1 is dropped
    summary = a.conversation_context("t1").summary
    assert "prompt-1-text" not in summary and "[2 prompt] prompt-2-text." in summary


def test_extractive_summary_respects_max_chars(tmp_path, closing):
    backend = open_backend(tmp_path, max_summary_chars=200)
    closing(backend)
    for r in range(3):
        backend.observe_round("t1", f"p{r} " + "word " * 100, f"r{r} " + "word " * 100)
    summary = backend.conversation_context("t1").summary
    assert summary and len(summary) <= 200
    assert summary.startswith("[5 response] r2"), "the newest message is what is kept"


def test_failing_llm_falls_back_to_extractive(tmp_path, closing, caplog):
    llm = FakeLLM(fail=True)
    backend = open_backend(tmp_path, llm)
    closing(backend)
    with caplog.at_level(logging.WARNING, logger="middle.memory.sliding_window"):
        play(backend, "t1", 3)
    (row,) = backend.summaries("t1")
    assert row["status"] == "completed" and "[0 prompt] prompt-1-text." in row["memory_text"]
    assert len(llm.calls) == 1
    assert any("LLM summary failed" in r.getMessage() for r in caplog.records)


def test_context_before_any_summary_is_the_whole_transcript(tmp_path, closing):
    backend = open_backend(tmp_path)
    closing(backend)
    assert backend.conversation_context("t9").gap_messages == []
    play(backend, "t1", 1)
    ctx = backend.conversation_context("t1")
    assert ctx.summary is None
    assert ctx.gap_messages == [
        {"seq": 0, "role": "prompt", "text": "prompt-1-text. More detail 1."},
        {"seq": 1, "role": "response", "text": "response-1-text. More detail 1."},
    ]
    with pytest.raises(ValueError):
        backend.observe_round(":project:", "p", "r")


def test_a_round_given_again_right_after_itself_is_kept_once(tmp_path, closing):
    """A run killed between giving a round and recording that gives it again on takeover
    (orchestrator.graph.nodes._observe): a round equal to the conversation's last is taken as
    given; the same words later, after another round, are a round of their own."""
    backend = open_backend(tmp_path, summarize_after_seq=100)  # no summary: every message in view
    closing(backend)
    play(backend, "t1", 1)
    play(backend, "t1", 1)  # the same round again
    assert len(backend.conversation_context("t1").gap_messages) == 2
    play(backend, "t1", 1, start=2)
    play(backend, "t1", 1)  # round 1's words again, after round 2: kept
    texts = [m["text"] for m in backend.conversation_context("t1").gap_messages if m["role"] == "response"]
    assert texts == ["response-1-text. More detail 1.", "response-2-text. More detail 2.",
                     "response-1-text. More detail 1."]


def test_summaries_and_messages_survive_reopen(tmp_path):
    backend = open_backend(tmp_path)
    play(backend, "t1", 4)
    backend.close()
    reopened = open_backend(tmp_path)
    try:
        ctx = reopened.conversation_context("t1")
        assert ctx.summary is not None and "prompt-4-text" in ctx.summary
        play(reopened, "t1", 1, start=5)
        assert spans(reopened.summaries("t1"))[-1] == (0, 9)
    finally:
        reopened.close()


def test_project_retrieve_is_uncovered_docs_newest_first_then_summary(tmp_path, closing):
    # Newest first, the summary last: a block cut short cuts the oldest work, never the
    # newest doc (a replacement a person just wrote is the newest).
    llm = FakeLLM(block_from=2)
    backend = open_backend(tmp_path, llm, background=True, window_size=4, summarize_after_seq=2)
    closing(backend)
    docs = [f"doc {i}: ticket {i} done." for i in range(5)]
    backend.index(docs[:2])
    assert backend.retrieve(["q"], 5)[0]["docs"] == docs[1::-1]
    backend.index(docs[2:3])  # third doc: first summary (docs 0-2), which completes
    backend.flush()
    backend.index(docs[3:4])  # second summary starts and is held
    assert llm.entered.wait(30)
    backend.index(docs[4:5])
    (result,) = backend.retrieve(["anything"], 5)
    assert result == {"question": "anything", "docs": [docs[4], docs[3], "summary #1"],
                      "doc_scores": [1.0, 1.0, 1.0]}
    assert backend.retrieve(["q"], 2)[0]["docs"] == [docs[4], "summary #1"]
    assert backend.retrieve(["q"], 1)[0]["docs"] == ["summary #1"]
    assert backend.retrieve(["q1", "q2"], 5)[1]["question"] == "q2"
    llm.release.set()
    backend.flush()
    assert backend.retrieve(["q"], 5)[0]["docs"] == [docs[4], "summary #2"]
    assert backend.list_docs() == docs


def test_delete_invalidates_every_summary_that_could_quote_the_doc(tmp_path, closing):
    llm = FakeLLM()
    backend = open_backend(tmp_path, llm, window_size=4, summarize_after_seq=2)
    closing(backend)
    docs = [f"doc-{i}-secret. Ticket {i} done." for i in range(5)]
    for doc in docs:
        backend.index([doc])
    before = backend.summaries()
    assert spans(before) == [(0, 2), (0, 3), (1, 4)]
    assert backend.delete([docs[0], "never indexed"]) == 1
    after = backend.summaries()
    # (0,2) and (0,3) covered doc 0; (1,4) was built on (0,3) and may still quote it.
    assert [r["status"] for r in after[:3]] == ["stale"] * 3
    assert all(r["memory_text"] == "" for r in after[:3])
    # A fresh summary over the remaining docs starts from scratch, without the deleted doc.
    assert spans(after[3:]) == [(1, 4)] and after[3]["base_memory_id"] is None
    assert "doc-0-secret" not in llm.calls[-1][1] and "no previous summary" in llm.calls[-1][1]
    assert backend.retrieve(["q"], 5)[0]["docs"] == [after[3]["memory_text"]]


def test_deleted_doc_never_comes_back_offline(tmp_path, closing):
    backend = open_backend(tmp_path, window_size=4, summarize_after_seq=2)
    closing(backend)
    docs = [f"doc-{i}-secret. Ticket {i} done." for i in range(5)]
    backend.index(docs)
    assert "doc-2-secret" in backend.retrieve(["q"], 5)[0]["docs"][0]
    assert backend.delete([docs[2]]) == 1
    retrieved = backend.retrieve(["q"], 5)[0]["docs"]
    assert retrieved and not any("doc-2-secret" in d for d in retrieved)
    assert docs[2] not in backend.list_docs()


def test_options_are_strict_and_store_is_created(tmp_path, closing):
    with pytest.raises(ValueError):
        SlidingWindowOptions(windowsize=3)
    with pytest.raises(ConfigError):
        SlidingWindowBackend(tmp_path / "x", {"window_size": 1})
    backend = SlidingWindowBackend(tmp_path / "new" / "dir", {"window_size": 6})
    closing(backend)
    assert backend.options.window_size == 6
    db = tmp_path / "new" / "dir" / "sliding_window.sqlite3"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_logs_follow_seed_004(tmp_path, closing, caplog):
    backend = open_backend(tmp_path)
    closing(backend)
    with caplog.at_level(logging.INFO, logger="middle.memory.sliding_window"):
        play(backend, "t1", 8)
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Summarized messages 0-5 for t1 in ") for m in messages)
    assert "Sliding window: dropping seq 0-1 for t1" in messages


def test_close_waits_for_background_summary(tmp_path):
    llm = FakeLLM(block_from=1)
    backend = open_backend(tmp_path, llm, background=True)
    play(backend, "t1", 3)
    assert llm.entered.wait(30)
    threading.Timer(0.05, llm.release.set).start()
    backend.close()
    reopened = open_backend(tmp_path)
    try:
        assert [r["status"] for r in reopened.summaries("t1")] == ["completed"]
    finally:
        reopened.close()


def test_a_doc_indexed_with_its_time_takes_its_place_in_the_window(tmp_path, closing):
    from orchestrator.plugin_api import MemoryRecord

    backend = open_backend(tmp_path, window_size=4, summarize_after_seq=2)
    closing(backend)
    docs = [f"doc {i}: step {i} done." for i in range(5)]
    for i, doc in enumerate(docs):
        backend.index_records([MemoryRecord(doc, timestamp=100.0 + i)])
    assert backend.delete([docs[1]]) == 1  # an edit or a forget: gone, then back at its time
    backend.index_records([MemoryRecord("doc 1: step 1 redone.", timestamp=101.0)])
    assert backend.list_docs() == [docs[0], "doc 1: step 1 redone.", *docs[2:]]
    assert [when for _, when in backend.list_records()] == [100.0, 101.0, 102.0, 103.0, 104.0]
    # the summary is rebuilt over the window in that order, its lines newest first with ids
    (summary,) = [d for d in backend.retrieve(["q"], 5)[0]["docs"] if d not in backend.list_docs()]
    lines = summary.splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "doc 4: step 4 done.", "doc 3: step 3 done.", "doc 2: step 2 done.", "doc 1: step 1 redone."]


def test_people_s_marks_rebuild_the_summary(tmp_path, closing):
    backend = open_backend(tmp_path, window_size=4, summarize_after_seq=2)
    closing(backend)
    docs = [f"doc {i}: rule {i}." for i in range(4)]
    backend.index(docs)
    marks = {docs[1]: "superseded by [abcd1234]", docs[2]: "expired", docs[3]: "pinned"}
    backend.apply_curation(marks)
    summary = backend.retrieve(["q"], 1)[0]["docs"][0]
    assert "superseded by [abcd1234]] doc 1: rule 1." in summary and "doc 2" not in summary
    assert ", pinned] doc 3: rule 3." in summary
    before = len(backend.summaries())
    backend.apply_curation(marks)  # the same marks: nothing rebuilt
    assert len(backend.summaries()) == before
    backend.apply_curation({})
    assert "superseded" not in backend.retrieve(["q"], 1)[0]["docs"][0]
