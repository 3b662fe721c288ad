"""What teams ask of memory (issue 38, item 4): a doc's expiry (`valid_until`), what memory said
at a date (`--as-of`), bulk forget and supersede undone as one, and `<private>` spans never
stored, on real backends over a real ticket store (memory.curation.Curator)."""

from __future__ import annotations

import pytest
from test_memory_curation import WHO, open_curator

from orchestrator.memory import bulk
from orchestrator.memory.asof import search_as_of
from orchestrator.memory.curation import CurationError, describe_change
from orchestrator.memory.facade import MemoryArgumentError
from orchestrator.memory.format import doc_id
from orchestrator.memory.private import cut_private
from orchestrator.memory.timeline import DateError, parse_when


def ids(docs: list[str]) -> list[str]:
    return [doc_id(d)[:8] for d in docs]


@pytest.fixture
def bm25(tmp_path):
    curator, store = open_curator(tmp_path, "bm25")
    yield curator, store
    curator.facade.close()
    store.close()


# -- <private> ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, kept", [
    ("Deploy with <private>key hunter2</private> the script.", "Deploy with the script."),
    ("a <PRIVATE>x</Private> b", "a b"),
    ("never closed <private>hunter2 to the end", "never closed"),
    ("<private>outer <private>inner</private> hunter2</private> after", "after"),
    ("stray </private> tag", "stray tag"),
    ("no tags at all", "no tags at all"),
])
def test_cut_private(text, kept):
    assert cut_private(text) == kept


def test_private_spans_never_reach_any_store(tmp_path):
    curator, store = open_curator(tmp_path, "sliding_window")
    memory = curator.facade
    try:
        # a ticket's completion doc and the API's index (facade.index), a person's add, an
        # import (index_new_records), and the ticket conversation a backend keeps
        memory.index("p", ["Ticket: Login. The token is <private>hunter2</private> rotated."])
        curator.add("p", "Use the VPN <private>password hunter2</private> for staging.", WHO)
        memory.index_new_records("p", [("Imported note <private>hunter2</private>.", None),
                                       ("<private>all of it is hunter2</private>", None)])
        memory.observe_round("p", "run-1", "Prompt <private>hunter2</private>", "Answer <private>x")
        docs = memory.list_docs("p")
        assert docs == ["Ticket: Login. The token is rotated.", "Use the VPN for staging.",
                        "Imported note ."]
        context = memory.conversation_context("p", "run-1")
        assert context is not None
        assert [m["text"] for m in context.gap_messages] == ["Prompt", "Answer"]
        assert not any("hunter2" in str(row) for row in store.memory_changes("p"))
        with pytest.raises(MemoryArgumentError, match="all <private>"):
            curator.add("p", "<private>only a secret</private>", WHO)
        # a delete by the text as a client gave it finds the doc as stored
        assert memory.delete("p", ["Ticket: Login. The token is <private>hunter2</private> rotated."]) == 1
    finally:
        memory.close()
        store.close()


# -- valid_until -------------------------------------------------------------------------------

def test_expired_docs_leave_recall_and_say_so(bm25):
    curator, store = bm25
    memory = curator.facade
    old = "Rule: staging deploys need the VPN."
    curator.add("p", old, WHO, valid_until="2020-01-31")
    curator.add("p", "Rule: staging deploys run nightly.", WHO)
    assert store.memory_state("p")[doc_id(old)]["valid_until"] == "2020-02-01T00:00:00.000000+00:00"
    assert memory.retrieve("p", ["staging deploys"], 5)[0]["docs"] == ["Rule: staging deploys run nightly."]
    assert curator.show("p", doc_id(old)[:8])["validity"] == "expired 2020-02-01T00:00:00"
    curator.pin("p", doc_id(old)[:8], WHO)  # a pinned doc that expired is not shown either
    block = memory.block("p", [], memory.retrieve("p", ["staging deploys"], 5), limit=5).text
    assert "VPN" not in block and "nightly" in block
    renewed = curator.set_valid_until("p", doc_id(old)[:8], "2999-12-31", WHO)
    assert renewed.message == "valid until 3000-01-01T00:00:00"
    assert old in memory.retrieve("p", ["staging deploys"], 5)[0]["docs"]
    curator.undo("p", renewed.change, WHO)
    assert old not in memory.retrieve("p", ["staging deploys"], 5)[0]["docs"]
    expire = next(c for c in store.memory_changes("p") if c["action"] == "expire")
    assert describe_change(expire) == f"set {doc_id(old)[:8]} valid until 3000-01-01T00:00:00"
    with pytest.raises(DateError, match="--valid-until 'soon' is not a date"):
        curator.set_valid_until("p", doc_id(old)[:8], "soon", WHO)


def test_dates_are_read_one_way():
    assert parse_when("2026-03-01", "--before") == "2026-03-01T00:00:00.000000+00:00"
    assert parse_when("2026-03-01", "--as-of", end_of_day=True) == "2026-03-02T00:00:00.000000+00:00"
    assert parse_when("2026-03-01T10:00+02:00", "--as-of") == "2026-03-01T08:00:00.000000+00:00"
    for bad in ("", "2026-02-30", "yesterday", "03/01/2026"):
        with pytest.raises(DateError, match="is not a date: write it as YYYY-MM-DD"):
            parse_when(bad, "--before")


# -- --as-of -----------------------------------------------------------------------------------

def test_as_of_answers_what_memory_said_then(bm25):
    curator, store = bm25
    quartz = "Rule: deploys run on the quartz cluster."
    cache = "Rule: the deploy cache lives in redis."
    cookie = "Rule: deploys rotate the session cookie."
    for doc in (quartz, cache, cookie):
        curator.add("p", doc, WHO)
    start = store.memory_changes("p")[0]["at"]  # after the three adds
    granite = curator.supersede("p", doc_id(quartz)[:8], "Rule: deploys run on granite now.", WHO)
    edited = curator.edit("p", doc_id(cache)[:8], "Rule: the deploy cache lives in memcached.", WHO)
    curator.forget("p", doc_id(cookie)[:8], WHO)
    curator.set_valid_until("p", doc_id("Rule: the deploy cache lives in memcached.")[:8], "2020-01-01", WHO)
    after = store.memory_changes("p")[0]["at"]

    def said(at: str) -> list[str]:
        return sorted(search_as_of(curator, "p", "deploys rule", at, 10)[2]["docs"])

    assert said(start) == sorted([quartz, cache, cookie])  # before any change: as added
    assert said(store.memory_change("p", granite.change)["at"]) == sorted(  # quartz superseded
        [granite.doc, cache, cookie])
    assert said(store.memory_change("p", edited.change)["at"]) == sorted(
        [granite.doc, edited.doc, cookie])
    assert said(after) == [granite.doc]  # the cookie deleted, the cache expired
    assert said("2020-01-01")[:1] == []  # nothing was in memory then
    curator.undo("p", granite.change, WHO)  # an undo is history too: then it still held
    assert said(after) == [granite.doc]
    assert said(store.memory_changes("p")[0]["at"]) == [quartz]


# -- bulk --------------------------------------------------------------------------------------

def test_bulk_forget_and_supersede_are_one_change_each(bm25):
    curator, store = bm25
    memory = curator.facade
    notes = [f"Note {n}: the legacy importer handles case {n}." for n in range(4)]
    for doc in notes:
        curator.add("p", doc, WHO)
    memory.index("p", ["Ticket: Keep this one. Unrelated work."])
    picked = bulk.select(curator, "p", bulk.DocFilter.of(source="hand", containing="legacy"))
    assert picked == notes
    gone = bulk.forget_all(curator, "p", picked[:3], WHO, "source 'hand'")
    assert memory.list_docs("p") == [notes[3], "Ticket: Keep this one. Unrelated work."]
    assert describe_change(store.memory_changes("p")[0]) == "deleted 3 docs (source 'hand')"
    assert [c["action"] for c in curator.show("p", doc_id(notes[3])[:8])["changes"]] == ["add"]
    curator.undo("p", gone.change, WHO)
    assert sorted(memory.list_docs("p")) == sorted([*notes, "Ticket: Keep this one. Unrelated work."])
    assert all(store.memory_state("p")[doc_id(d)]["origin"] == {"kind": "hand"} for d in notes)

    new = "Rule: the importer is rewritten; the legacy cases are gone."
    done = bulk.supersede_all(curator, "p", notes, new, WHO, "containing 'legacy'")
    states = store.memory_state("p")
    assert all(states[doc_id(d)]["superseded_by"] == doc_id(new) for d in notes)
    result = memory.retrieve("p", ["legacy importer case"], 3)[0]
    assert result["docs"][0] == new and len(result["docs"]) > 3  # each kept below it as history
    assert curator.show("p", doc_id(notes[0])[:8])["changes"][0]["action"] == "bulk"
    curator.undo("p", done.change, WHO)
    assert new not in memory.list_docs("p")
    assert not any(store.memory_state("p")[doc_id(d)]["superseded_by"] for d in notes)
    with pytest.raises(CurationError, match="undone already"):
        curator.undo("p", done.change, WHO)


@pytest.mark.parametrize("given, words", [
    ({}, "give at least one filter"),
    ({"source": "email"}, "--source 'email' is none of ticket, commit"),
    ({"before": "2026-99-01"}, "--before '2026-99-01' is not a date"),
    ({"after": "later"}, "--after 'later' is not a date"),
])
def test_bad_bulk_filters_are_refused(bm25, given, words):
    curator, store = bm25
    curator.add("p", "a note", WHO)
    with pytest.raises(CurationError, match=words):
        bulk.select(curator, "p", bulk.DocFilter.of(**given))
    with pytest.raises(CurationError, match="no doc matches the filter"):
        bulk.forget_all(curator, "p", [], WHO, "")
    assert curator.facade.list_docs("p") == ["a note"] and len(store.memory_changes("p")) == 1


def test_bulk_dates_filter_by_the_docs_own_time(tmp_path):
    curator, store = open_curator(tmp_path, "sliding_window")  # keeps each doc's time
    memory = curator.facade
    try:
        memory.index_records("p", [("Commit 1 (2019): old work.", 1_546_300_800.0),  # 2019-01-01
                                   ("Commit 2 (2024): newer work.", 1_704_067_200.0)])  # 2024-01-01
        memory.index("p", ["Ticket: today."])
        before = bulk.select(curator, "p", bulk.DocFilter.of(before="2020-01-01"))
        assert before == ["Commit 1 (2019): old work."]
        after = bulk.select(curator, "p", bulk.DocFilter.of(after="2020-01-01", containing="work"))
        assert after == ["Commit 2 (2024): newer work."]
    finally:
        memory.close()
        store.close()


@pytest.mark.postgres
def test_sliding_window_keeps_time_order_and_marks_on_postgresql(tmp_path, pg_url):
    # the window's renumbering and the store's valid_until column, on the team's database
    curator, store = open_curator(tmp_path, "sliding_window", url=pg_url, store_target=pg_url)
    memory = curator.facade
    try:
        docs = [f"Ticket {n}: work item {n} done." for n in range(6)]
        for doc in docs:
            curator.add("p", doc, WHO, valid_until="2999-01-01" if doc == docs[0] else None)
        edited = curator.edit("p", doc_id(docs[2])[:8], "Ticket 2: work item 2 redone.", WHO)
        assert memory.list_docs("p") == [*docs[:2], edited.doc, *docs[3:]]  # in its place
        curator.supersede("p", doc_id(docs[1])[:8], "Ticket 1: replaced by the new flow.", WHO)
        memory.retrieve("p", ["q"], 5)  # the marks reach the backend: its summary is rebuilt
        memory.flush()  # (in the background by default)
        block = memory.block("p", [], memory.retrieve("p", ["q"], 5), limit=5).text
        assert f"superseded by [{doc_id('Ticket 1: replaced by the new flow.')[:8]}]" in block
        assert store.memory_state("p")[doc_id(docs[0])]["valid_until"].startswith("2999-01-02")
    finally:
        memory.close()
        store.close()
