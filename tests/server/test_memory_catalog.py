"""The Memory page and the docs API at 100,000 docs (issue 38): one page of docs whatever the
store holds, a cursor that visits every doc once, filters that combine, bad filters one error;
and the catalog's usage following a doc through its edits."""

from __future__ import annotations

import html
import re
from datetime import date, timedelta
from typing import Any, Iterator

import pytest
from fastapi.testclient import TestClient

from orchestrator.bench.memory_page import AUTHORS, PROJECT, bench_project, doc_text, fill_memory, origin_of
from orchestrator.memory.catalog import Catalog, usage_by_doc
from orchestrator.memory.format import doc_id
from orchestrator.server import create_app

pytestmark = pytest.mark.slow  # 100,000 docs indexed by bm25 once for the module (about 10 s)

BIG = 100_000
PAGE = f"/projects/{PROJECT}/memory"
DOCS = f"/api/projects/{PROJECT}/memory/docs"


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, Any]]]:
    """A server whose project memory held 20 docs (the page then measured), then 100,000."""
    app = create_app(bench_project(tmp_path_factory.mktemp("catalog")))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        state = app.state.middle
        fill_memory(state.memory(), state.store, PROJECT, 0, 20)
        small = client.get(PAGE)
        fill_memory(state.memory(), state.store, PROJECT, 20, BIG)  # one bulk index (seconds)
        yield client, {"small": small}


def _items(html: str) -> list[str]:
    return re.findall(r'<li class="doc-item" data-doc="[^"]*" data-id="([0-9a-f]{8})"', html)


def test_the_first_page_at_100_000_docs_is_the_size_of_the_one_at_20(grown):
    client, seen = grown
    small, big = seen["small"], client.get(PAGE)
    assert small.status_code == big.status_code == 200
    assert len(_items(small.text)) == len(_items(big.text)) == 20
    assert f'id="matched">{BIG}<' in big.text.replace(",", "")
    # the same 20 docs' worth of bytes (the docs differ only in their numbers), not 5,000 times more
    assert 0.8 < len(big.content) / len(small.content) < 1.25, (len(small.content), len(big.content))
    nxt = re.search(r'<a href="([^"]+)" id="next-page"', big.text).group(1).replace("&amp;", "&")
    second = client.get(PAGE + nxt)
    assert len(_items(second.text)) == 20 and not set(_items(second.text)) & set(_items(big.text))


def test_the_cursor_visits_every_doc_once(grown):
    client, _ = grown
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 500, "sort": "newest", **({"cursor": cursor} if cursor else {})}
        page = client.get(DOCS, params=params).json()
        assert page["total"] == BIG and page["matched"] == BIG
        seen += [d["text"] for d in page["docs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == BIG and len(set(seen)) == BIG
    assert seen[0] == doc_text(BIG - 1) and seen[-1] == doc_text(0)  # newest first


def _expected(keep: Any) -> set[str]:
    return {doc_text(i) for i in range(BIG) if keep(i)}


def _all(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    docs, cursor = [], None
    while True:
        page = client.get(DOCS, params={**params, "limit": 500, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.text
        docs += page.json()["docs"]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return docs


def test_filters_combine(grown):
    client, _ = grown
    # fill_memory's rules: every 10th doc an origin and an author (origin_of), every 500th
    # pinned, every 1000th (from 1000, but the last) superseded
    commit_alice = _all(client, source="commit", author="ALICE")  # the author matched in any case
    assert {d["text"] for d in commit_alice} == _expected(lambda i: origin_of(i) == ("commit", AUTHORS[0]))
    assert commit_alice and all(d["source"] == "commit" and d["author"] == AUTHORS[0] for d in commit_alice)
    pinned = _all(client, pinned="true")
    assert {d["text"] for d in pinned} == _expected(lambda i: i % 500 == 0 and not (i % 1000 == 0 and i))
    assert all(d["pinned"] for d in pinned)
    superseded = _all(client, superseded="true", source="commit", author="bob")
    assert {d["text"] for d in superseded} == _expected(
        lambda i: i % 1000 == 0 and i and origin_of(i) == ("commit", AUTHORS[1]))
    assert superseded and all(d["superseded_by"] for d in superseded)
    today = date.today()
    assert client.get(DOCS, params={"since": str(today + timedelta(days=2))}).json()["matched"] == 0
    assert client.get(DOCS, params={"until": str(today - timedelta(days=2))}).json()["matched"] == 0
    both = client.get(DOCS, params={"since": str(today - timedelta(days=1)), "until": str(today + timedelta(days=1)),
                                    "pinned": "false", "never_used": "true"}).json()
    assert both["matched"] == BIG - len(pinned)
    page = client.get(PAGE, params={"source": "hand", "pinned": "true"}).text
    assert f'id="matched">{len(_all(client, source="hand", pinned="true"))}<' in page


@pytest.mark.parametrize(("params", "words"), [
    ({"source": "email"}, "source 'email' is not one of ticket, commit"),
    ({"since": "yesterday"}, "YYYY-MM-DD"),
    ({"pinned": "maybe"}, "pinned must be true or false"),
    ({"cursor": "not-a-cursor"}, "cursor is not one this server gave"),
    ({"limit": "0"}, "limit"),
])
def test_a_bad_filter_is_one_error_naming_it(grown, params, words):
    client, _ = grown
    r = client.get(DOCS, params=params)
    assert r.status_code in (400, 422) and words in r.text, r.text
    if "limit" not in params:
        page = client.get(PAGE, params=params)
        assert page.status_code == 400 and words in html.unescape(page.text)


def test_a_cursor_of_another_order_is_refused(grown):
    client, _ = grown
    cursor = client.get(DOCS, params={"sort": "newest"}).json()["next_cursor"]
    r = client.get(DOCS, params={"sort": "oldest", "cursor": cursor})
    assert r.status_code == 400 and "made for sort 'newest'" in r.json()["error"]


def test_usage_follows_a_doc_through_its_edits_and_history_is_no_candidate():
    a, b, c = "Sessions use cookies.", "Sessions use signed cookies.", "Sessions use JWT."
    edit = {"id": 1, "action": "edit", "doc_id": doc_id(a), "before": {"doc": a},
            "after": {"doc": b, "doc_id": doc_id(b)}, "undone_by": None}
    usage = usage_by_doc({doc_id(a)[:8]: {"recalled": 3, "used": 1}, doc_id(b)[:8]: {"recalled": 2, "used": 0}},
                         [edit])  # type: ignore[list-item]
    assert usage == {doc_id(b)[:8]: {"recalled": 5, "used": 1}}
    undo = {"id": 2, "action": "undo", "doc_id": doc_id(b), "before": {"doc": b, "doc_id": doc_id(b)},
            "after": {"doc": a}, "undone_by": None}
    back = usage_by_doc({doc_id(a)[:8]: {"recalled": 3, "used": 1}, doc_id(b)[:8]: {"recalled": 2, "used": 0}},
                        [edit, undo])  # type: ignore[list-item]
    assert back == {doc_id(a)[:8]: {"recalled": 5, "used": 1}}  # the undone edit's counts come back
    unused = {"recalled": 4, "used": 0}
    states = {doc_id(b): {"doc_id": doc_id(b), "doc": b, "pinned": False, "superseded_by": doc_id(c),
                          "origin": None, "added_by": None, "added_at": None}}
    catalog = Catalog([(b, 1.0), (c, 2.0)], states, {}, {doc_id(b)[:8]: unused, doc_id(c)[:8]: unused})  # type: ignore[arg-type]
    assert catalog.describe(b)["candidate"] is None  # superseded already: history, not a candidate
    assert "never used: a candidate" in catalog.describe(c)["candidate"]


@pytest.mark.postgres
def test_a_store_in_postgresql_is_listed_and_a_change_shows_at_once(tmp_path, pg_url):
    """A store in the database: a change (a pin here; an add and a delete on another machine) is
    listed at the next page, the kept listing caught up from the change log in the database."""
    bench_project(tmp_path)
    (tmp_path / "middle.toml").write_text(f'[memory]\nsave_dir = ".middle/memory"\nbackend = "bm25"\n'
                                          f'url = "{pg_url}"\n\n[project]\nid = "{PROJECT}"\n')
    from orchestrator.config.settings import load_config

    config = load_config(tmp_path / "middle.toml", environ={})
    app = create_app(config)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        state = app.state.middle
        assert state.memory().url == pg_url
        fill_memory(state.memory(), state.store, PROJECT, 0, 30)
        page = client.get(DOCS, params={"limit": 500}).json()
        assert page["total"] == 30
        quiet = next(d for d in page["docs"] if not d["pinned"])
        assert client.post(f"/api/projects/{PROJECT}/memory/docs/{quiet['id']}/pin").status_code == 200
        pinned = {d["id"] for d in client.get(DOCS, params={"pinned": "true"}).json()["docs"]}
        assert quiet["id"] in pinned
        # another machine's write (its own facade on the same database) is caught up with from
        # the change log in the database, not by listing the store again
        catalog = state.catalogs[PROJECT]
        other = create_app(config).state.middle
        other.services.curator().add(PROJECT, "Written on another machine.", AUTHORS[1])
        other.memory().delete(PROJECT, [doc_text(3)])
        page = client.get(DOCS, params={"limit": 500, "sort": "newest"}).json()
        assert page["total"] == 30 and page["docs"][0]["text"] == "Written on another machine."
        assert doc_text(3) not in {d["text"] for d in page["docs"]}
        assert state.catalogs[PROJECT] is catalog
        other.services.close()
