"""Two docs whose 8-character ids meet (at 100,000 docs a few pairs do): the board's actions
name a doc by its whole id (`data-key`, the API's `key`), so each pins its own doc, where the
short id is refused as ambiguous; the ids they are shown by (9 characters) tell them apart."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from server_helpers import make_project

from orchestrator.memory.format import doc_id
from orchestrator.server import create_app

# Found by counting up: their SHA-256 ids both start 563c539b.
ONE = "Deploy note 16640: the staging cluster moved."
TWO = "Deploy note 67893: the staging cluster moved."
BASE = "/api/projects/calc/memory"


def test_docs_sharing_a_short_id_are_each_acted_on_from_the_board(tmp_path):
    assert doc_id(ONE)[:8] == doc_id(TWO)[:8] and doc_id(ONE) != doc_id(TWO)
    app = create_app(make_project(tmp_path))
    with TestClient(app, base_url="http://127.0.0.1") as c:
        assert c.post(f"{BASE}/index", json={"docs": [ONE, TWO]}).status_code == 200
        page = c.get("/projects/calc/memory").text
        keys = re.findall(r'data-key="([0-9a-f]+)"', page)
        assert sorted(keys) == sorted([doc_id(ONE), doc_id(TWO)])
        listed = c.get(f"{BASE}/docs").json()["docs"]
        # each shown by the 9 characters that tell it from the other (as the block shows it)
        assert {d["key"] for d in listed} == set(keys)
        assert {d["id"] for d in listed} == {doc_id(ONE)[:9], doc_id(TWO)[:9]}
        assert c.post(f"{BASE}/docs/{doc_id(TWO)[:8]}/pin").status_code == 400  # ambiguous
        r = c.post(f"{BASE}/docs/{doc_id(TWO)}/pin")
        assert r.status_code == 200, r.text
        pinned = {d["key"]: d["pinned"] for d in c.get(f"{BASE}/docs").json()["docs"]}
        assert pinned == {doc_id(ONE): False, doc_id(TWO): True}
        search = c.get("/projects/calc/memory", params={"q": "staging cluster moved"}).text
        assert re.findall(r'id="results".*', search, re.S) and doc_id(TWO) in search


def test_the_api_s_text_fields_name_each_doc_by_the_id_it_is_shown_by(tmp_path):
    app = create_app(make_project(tmp_path))
    one, two = doc_id(ONE)[:9], doc_id(TWO)[:9]
    with TestClient(app, base_url="http://127.0.0.1") as c:
        assert c.post(f"{BASE}/index", json={"docs": [ONE]}).status_code == 200
        r = c.post(f"{BASE}/docs/{one}/supersede", json={"text": TWO})  # TWO replaces ONE
        assert r.status_code == 200, r.text
        hits = c.get(f"{BASE}/search", params={"q": "staging cluster moved", "explain": "true"}).json()["results"]
        by_doc = {h["doc"]: h for h in hits}
        assert by_doc[ONE]["id"] == one and by_doc[ONE]["superseded_by"] == two
        assert f"superseded by {two}" in by_doc[ONE]["why"] and f"supersedes {one}" in by_doc[TWO]["why"]
        shown = c.get(f"{BASE}/docs/{two}").json()
        assert f"written to supersede {one}" in shown["from"]
