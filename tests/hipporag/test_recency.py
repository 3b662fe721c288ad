"""The recency blend over PageRank mass: relevance still counts among the recent passages."""

from __future__ import annotations

import numpy as np

from backends.hipporag.backend import _SaturatedMass

NOW = 1_750_000_000.0
HOUR = 3600.0
DAY = 24 * HOUR


def test_saturated_mass_keeps_the_order_and_gives_the_typical_candidate_a_half():
    ids = np.array([3, 5, 8, 9, 12])
    mass = np.array([0.5, 0.01, 0.02, 0.0, 0.04])
    relevance = _SaturatedMass(ids, mass).relevance([3, 5, 8, 9, 12])
    assert relevance[8] == 0.5  # the median of the pool
    assert relevance[3] > relevance[12] > relevance[8] > relevance[5] > relevance[9] == 0.0
    # the outlier is not 1 with everything else near 0, as min-max over the pool made it
    assert relevance[12] > 0.6 and relevance[3] < 1.0


def test_a_passage_the_graph_does_not_hold_yet_has_no_mass():
    # Another process may add a passage between reading the graph and reading the newest ones.
    relevance = _SaturatedMass(np.array([1, 2, 4]), np.array([0.2, 0.1, 0.3])).relevance([4, 3, 7])
    assert relevance[3] == 0.0 and relevance[7] == 0.0 and relevance[4] > 0.5


def test_among_recent_passages_the_related_one_ranks_above_a_newer_unrelated_one(open_backend):
    # An old passage holding the only mention of a name in the query takes most of the mass;
    # the recent passage sharing the query's (common) paths must still beat a newer one that
    # shares nothing, as it does in hybrid's blend.
    backend = open_backend(recency_weight=0.5, recency_scale_days=1.0)

    def add(doc: str, at: float) -> None:
        backend.clock = lambda: at
        backend.index([doc])

    add("Ticket: Stop deploying tags from Travis. Changed: .travis.yml", NOW - 30 * DAY)
    for n, title in enumerate(["Row count speedup", "Sortable columns", "JSON shapes",
                               "Faceting by column", "SQL time limit", "Canned queries"]):
        add(f"Ticket: {title}. Changed: datasette/app.py, tests/fixtures.py, tests/test_api.py",
            NOW - (20 - n) * DAY)
    related = "Ticket: Paginate when sorting by a nullable column. Changed: datasette/app.py, " \
              "tests/fixtures.py, tests/test_api.py"
    unrelated = "Ticket: Larger heading font."
    add(related, NOW - 6 * HOUR)
    add(unrelated, NOW - 1 * HOUR)
    backend.clock = lambda: NOW

    query = "Revert until tests pass on Travis\nChanged datasette/app.py, tests/fixtures.py, " \
            "tests/test_api.py"
    docs = backend.retrieve([query], 3)[0]["docs"]
    assert related in docs
    assert unrelated not in docs or docs.index(related) < docs.index(unrelated)
    assert any(d.startswith("Ticket: Stop deploying tags from Travis") for d in docs)  # its name


def test_a_query_of_paths_alone_ranks_the_doc_naming_them_above_newer_docs(open_backend):
    # Every "... Changed: app/x.py" fact looks alike to a sentence model, so a path-only query
    # seeds only the paths it names; the doc naming them stays first though newer docs exist.
    backend = open_backend(embedder="minilm", recency_weight=0.5, recency_scale_days=1.0)
    docs = ["Ticket: Add login page. Users sign in with email. Changed: app/login.py",
            "Ticket: Fix CSV export. Export failed on unicode. Changed: app/export.py",
            "Ticket: Speed up search. Added an index on title. Changed: app/db.py",
            "Ticket: Refactor settings. Moved config to settings.toml. Changed: app/settings.py"]
    for n, doc in enumerate(docs):
        backend.clock = lambda n=n: NOW - (len(docs) - n) * 6 * HOUR
        backend.index([doc])
    backend.clock = lambda: NOW
    assert backend.retrieve(["app/export.py"], 4)[0]["docs"][0] == docs[1]
    assert backend.retrieve(["app/login.py, app/db.py"], 4)[0]["docs"][:2] == [docs[2], docs[0]]
