"""Ranked backends score by relevance alone: a decision made a month ago ranks above newer
docs that match the query less well; time only breaks a tie (issue: memory for the life of a
project)."""

from __future__ import annotations

import pytest

from backends.retrieval import pipeline
from backends.retrieval.options import PipelineOptions
from orchestrator.plugins.manager import registry

DAY = 86400.0
NOW = 1_750_000_000.0
DECISION = ("Decision: the login form accepts email addresses with a plus sign "
            "(user+tag@example.com); validation must never strip the plus tag.")
NEWER = ["Ticket: login form button colour. Changed: app/login.css",
         "Ticket: email addresses page wording. Changed: templates/email.html",
         "Ticket: plus sign icon in the form toolbar. Changed: app/form.css",
         "Ticket: sign-up form rejects empty names. Changed: app/signup.py"]
QUERY = "login form rejects email addresses with a plus sign tag"


@pytest.mark.parametrize("name", ["bm25", "dense", "hybrid", "hipporag", "hindsight"])
def test_a_month_old_decision_outranks_newer_weaker_matches(tmp_path, name):
    cls = registry().backend_class(name)
    options = {} if name == "bm25" else {"embedder": "hashing"}
    backend = cls(tmp_path / name, registry().backend_options(name, options), None)
    now = [NOW - 30 * DAY]
    backend.clock = lambda: now[0]
    try:
        backend.index([DECISION])
        for i, doc in enumerate(NEWER):  # the work of the last few hours
            now[0] = NOW - (len(NEWER) - i) * 3600
            backend.index([doc])
        now[0] = NOW
        (result,) = backend.retrieve([QUERY], 3)
        assert result["docs"][0] == DECISION
    finally:
        backend.close()


def test_time_only_breaks_a_tie_newer_first():
    older = pipeline.Candidate(1, "a", 0.7, NOW - 10 * DAY)
    newer = pipeline.Candidate(2, "b", 0.7, NOW - DAY)
    best = pipeline.Candidate(3, "c", 0.9, NOW - 100 * DAY)
    ranked = pipeline.run("q", [older, newer, best], 3, PipelineOptions(), NOW)
    assert [c.id for c in ranked] == [3, 2, 1]
    assert [c.score for c in ranked] == [0.9, 0.7, 0.7]  # relevance, undecayed
