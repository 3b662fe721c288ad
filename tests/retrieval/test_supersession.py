"""Supersession: a later memory that amends an earlier decision on the same subject ranks right
above it; the earlier one stays, marked superseded with both dates (one shared component)."""

from __future__ import annotations

import pytest

from backends.retrieval.supersession import Memory, amends, reorder, superseded_by
from orchestrator.plugins.manager import registry

DAY = 86400.0
T0 = 1_700_000_000.0
RULE = ("Decision: merge_records keys duplicates on the lowercased email and calendar day; on a "
        "collision the record with the latest updated timestamp wins.")
AMENDMENT = ("Amendment to the merge rule: keep-latest wipes names, so on a duplicate collision "
             "the record with more filled fields wins instead; the lowercased email and calendar "
             "day key stays.")
DECOYS = ["Ticket: chunked iteration helper. Changed: iterutils.py",
          "Ticket: the cache decorator gets a typed option. Changed: cacheutils.py",
          "Ticket: strutils slugify handles unicode. Changed: strutils.py",
          "Ticket: email validation regex accepts plus tags. Changed: validators.py"]
QUERY = ("Sync merge keeps duplicate contacts: merge_records with the same lowercased email on "
         "the same calendar day, latest updated timestamp")


def test_an_amendment_is_found_by_its_words_and_the_subject_it_restates():
    assert amends("We changed our mind: back off exponentially.") and amends("superseding X")
    assert not amends("Add a retry helper")
    # "instead" and "no longer" are everyday prose: they count beside a decision word only.
    assert amends("The cache no longer follows the rule we agreed: keys may be ints.")
    assert not amends("The loop no longer crashes. Use a set instead of a list.")
    pool = [Memory(1, RULE, T0), *(Memory(i + 2, d, T0 + i) for i, d in enumerate(DECOYS)),
            Memory(9, AMENDMENT, T0 + 30 * DAY)]
    assert superseded_by(pool) == {1: 9}
    # An earlier "amendment" cannot supersede a later rule; unrelated "instead" supersedes none.
    assert superseded_by([Memory(1, AMENDMENT, T0), Memory(2, RULE, T0 + DAY)]) == {}
    assert superseded_by([Memory(1, RULE, T0),
                          Memory(2, "Use tabs instead of spaces in the Makefile", T0 + DAY)]) == {}


def test_docs_stored_at_one_time_supersede_none(tmp_path):
    """"Later" is later in time: a batch stored at once (MuSiQue's Wikipedia passages, where
    "Freedom's Journal was superseded in 1829" once outranked a gold passage) has no order."""
    assert superseded_by([Memory(1, RULE, T0), Memory(2, AMENDMENT, T0)]) == {}
    backend = registry().backend_class("hybrid")(
        tmp_path / "h", registry().backend_options("hybrid", {"embedder": "hashing"}), None)
    backend.clock = lambda: T0
    try:
        backend.index([RULE, *DECOYS, AMENDMENT])
        (result,) = backend.retrieve([QUERY], 3)
        assert "superseded" not in result and result["docs"][0] == RULE  # relevance alone
    finally:
        backend.close()


def test_reorder_puts_the_amendment_right_above_and_keeps_k():
    pool = [Memory(1, RULE, T0), Memory(2, DECOYS[0], T0 + 1), Memory(3, AMENDMENT, T0 + DAY)]
    ranked, pairs = reorder([(2, 0.95), (1, 0.9), (3, 0.2)], 2, pool)
    assert [i for i, _ in ranked] == [2, 3]  # the amendment from the pool; k = 2 kept
    assert pairs == {}  # the superseded rule fell out of the top 2: nothing to mark
    ranked, pairs = reorder([(1, 0.9), (2, 0.5), (3, 0.2)], 3, pool)
    assert [i for i, _ in ranked] == [3, 1, 2] and pairs == {1: 3}
    assert [s for _, s in ranked] == [0.9, 0.9, 0.5]  # scores stay best first


@pytest.mark.parametrize("name", ["dense", "hybrid", "hipporag", "hindsight"])
def test_backends_rank_the_amendment_above_the_rule_it_supersedes(tmp_path, name):
    cls = registry().backend_class(name)
    backend = cls(tmp_path / name, registry().backend_options(name, {"embedder": "hashing"}), None)
    now = [T0]
    backend.clock = lambda: now[0]
    try:
        for i, doc in enumerate([RULE, *DECOYS]):
            now[0] = T0 + i * 3600
            backend.index([doc])
        now[0] = T0 + 30 * DAY
        backend.index([AMENDMENT])
        (result,) = backend.retrieve([QUERY], 3)
        docs = result["docs"]
        assert AMENDMENT in docs and RULE in docs  # the earlier rule stays retrievable
        assert docs.index(AMENDMENT) == docs.index(RULE) - 1
        assert result["superseded"] == [{"doc": docs.index(RULE), "by": docs.index(AMENDMENT),
                                         "date": "2023-11-14", "by_date": "2023-12-14"}]
    finally:
        backend.close()


def test_bm25_stays_the_plain_keyword_baseline(tmp_path):
    backend = registry().backend_class("bm25")(tmp_path / "b", registry().backend_options("bm25", {}), None)
    try:
        backend.index([RULE, AMENDMENT])
        (result,) = backend.retrieve([QUERY], 2)
        assert result["docs"][0] == RULE and "superseded" not in result
    finally:
        backend.close()
