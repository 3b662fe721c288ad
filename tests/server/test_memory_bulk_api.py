"""Bulk forget and supersede over HTTP, and search as of a date (issue 38): the docs a filter
picks are looked at a page at a time with one confirmation token, changed as one change only
with that token, and put back by one undo; `as_of` answers what memory said then; every bad
input a 4xx with a sentence."""

from __future__ import annotations

import time
from datetime import datetime, timezone

from orchestrator.memory.format import doc_id

BASE = "/api/projects/calc/memory"
HAND = ["Sessions use signed cookies.", "The CSV export streams rows.", "Deploys run from ops/deploy.sh."]


def _docs(c) -> set[str]:
    return {d["text"] for d in c.get(f"{BASE}/docs", params={"limit": 500}).json()["docs"]}


def test_a_filtered_selection_is_paged_confirmed_forgotten_as_one_and_undone_as_one(server):
    c = server.client
    for text in HAND:
        assert c.post(f"{BASE}/docs", json={"text": text}).status_code == 200
    assert c.post(f"{BASE}/index", json={"docs": ["An API doc stays."]}).status_code == 200
    first = c.get(f"{BASE}/bulk", params={"source": "hand", "limit": 2}).json()
    assert first["count"] == 3 and len(first["docs"]) == 2 and first["filter"] == "source 'hand'"
    rest = c.get(f"{BASE}/bulk", params={"source": "hand", "limit": 2, "cursor": first["next_cursor"]}).json()
    assert rest["next_cursor"] is None and rest["confirm"] == first["confirm"]
    assert {d["text"] for d in first["docs"] + rest["docs"]} == set(HAND)

    c.post(f"{BASE}/docs", json={"text": "A fourth doc by hand, added after the look."})
    stale = c.post(f"{BASE}/bulk/forget", json={"source": "hand", "confirm": first["confirm"]})
    assert stale.status_code == 409 and "look at them again" in stale.json()["error"]
    assert set(HAND) <= _docs(c)  # nothing changed

    look = c.get(f"{BASE}/bulk", params={"source": "hand"}).json()
    done = c.post(f"{BASE}/bulk/forget", json={"source": "hand", "confirm": look["confirm"]})
    assert done.status_code == 200, done.text
    assert done.json()["count"] == 4 and _docs(c) == {"An API doc stays."}
    undo = c.post(f"{BASE}/changes/{done.json()['change']}/undo")
    assert undo.status_code == 200 and "put back 4 docs" in undo.json()["message"]
    assert set(HAND) <= _docs(c) and len(_docs(c)) == 5


def test_a_bulk_supersede_keeps_them_as_history_and_one_undo_takes_it_back(server):
    c = server.client
    for text in HAND:
        c.post(f"{BASE}/docs", json={"text": text})
    look = c.get(f"{BASE}/bulk", params={"containing": "s"}).json()
    r = c.post(f"{BASE}/bulk/supersede", json={"containing": "s", "with": "Read docs/ops.md instead.",
                                               "confirm": look["confirm"]})
    assert r.status_code == 200, r.text
    history = c.get(f"{BASE}/docs", params={"superseded": "true"}).json()
    assert history["count"] == 3 and all(d["superseded_by"] == r.json()["id"] for d in history["docs"])
    assert c.post(f"{BASE}/changes/{r.json()['change']}/undo").status_code == 200
    assert c.get(f"{BASE}/docs", params={"superseded": "true"}).json()["count"] == 0
    assert "Read docs/ops.md instead." not in _docs(c)


def test_bad_bulk_requests_are_4xx_with_a_sentence(server):
    c = server.client
    c.post(f"{BASE}/docs", json={"text": HAND[0]})
    for params, words in [({}, "give at least one filter"), ({"source": "fax"}, "is none of"),
                          ({"before": "last tuesday"}, "is not a date"),
                          ({"source": "hand", "cursor": "zzzz"}, "start again")]:
        r = c.get(f"{BASE}/bulk", params=params)
        assert r.status_code == 400 and words in r.json()["error"], (params, r.text)
    r = c.post(f"{BASE}/bulk/forget", json={"source": "commit", "confirm": "x"})
    assert r.status_code == 400 and "no doc matches the filter" in r.json()["error"]
    r = c.post(f"{BASE}/bulk/forget", json={"source": "hand"})
    assert r.status_code == 400 and "confirm" in r.json()["error"]


def test_search_as_of_says_what_memory_said_then(server):
    c = server.client
    ident = c.post(f"{BASE}/docs", json={"text": "Sessions use signed cookies."}).json()["id"]
    time.sleep(0.01)  # an instant strictly between the add and the forget
    between = datetime.now(timezone.utc).isoformat()
    time.sleep(0.01)
    assert c.post(f"{BASE}/docs/{ident}/forget").status_code == 200
    now = c.get(f"{BASE}/search", params={"q": "sessions cookies"}).json()
    assert now["results"] == [] and "as_of" not in now
    then = c.get(f"{BASE}/search", params={"q": "sessions cookies", "as_of": between}).json()
    assert then["held_then"] == 1 and [h["doc"] for h in then["results"]] == ["Sessions use signed cookies."]
    before = c.get(f"{BASE}/search", params={"q": "sessions", "as_of": "2001-01-01"}).json()
    assert before["held_then"] == 0 and before["results"] == []
    bad = c.get(f"{BASE}/search", params={"q": "sessions", "as_of": "yesterday-ish"})
    assert bad.status_code == 400 and "is not a date" in bad.json()["error"]


def test_bulk_pages_are_complete_non_overlapping_and_pick_what_the_cli_picks(server):
    # the pages come from the server's kept catalog, the CLI's selection from a listing of the
    # store: the same docs in the same order, each on exactly one page
    from orchestrator.bench.memory_page import fill_memory
    from orchestrator.memory import bulk

    c, state = server.client, server.state
    fill_memory(state.memory(), state.store, "calc", 0, 300)
    c.post(f"{BASE}/docs", json={"text": HAND[0]})  # a write after the catalog was first kept
    curator = state.services.curator()
    tomorrow = datetime.fromtimestamp(time.time() + 86400, timezone.utc).date().isoformat()
    for flt in [{"source": "commit"}, {"containing": "module m3"}, {"after": "2000-01-01"},
                {"source": "hand", "before": tomorrow}, {"containing": "no doc says this"}]:
        seen, cursor, confirms = [], None, set()
        while True:
            page = c.get(f"{BASE}/bulk", params={**flt, "limit": 7, **({"cursor": cursor} if cursor else {})})
            assert page.status_code == 200, page.text
            body = page.json()
            seen += [d["id"] for d in body["docs"]]
            confirms.add(body["confirm"])
            cursor = body["next_cursor"]
            if cursor is None:
                break
        picked = bulk.select(curator, "calc", bulk.DocFilter.of(**flt))
        assert len(seen) == len(set(seen)) == body["count"], flt
        assert seen == [doc_id(d)[:8] for d in picked], flt
        assert len(confirms) == 1 and confirms == {bulk.selection_token(picked)}, flt
    assert body["count"] == 0


def test_the_memory_page_bench_shows_and_pages_bulk_at_a_small_size(tmp_path):
    # `middle bench memory-page` at 20 docs: its show by id and bulk pages answer (the bench
    # checks the doc shown is the one asked for); the figures themselves are docs/benchmarks.md's
    from orchestrator.bench.memory_page import measure

    (row,) = measure((20,), root=tmp_path / "bench")
    assert row["docs"] == 20 and {"show_by_id_ms", "find_by_id_ms", "bulk_page_ms", "bulk_next_ms"} <= set(row)
