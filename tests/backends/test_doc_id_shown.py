"""Every id a person reads tells the doc apart, as the block's do: with two docs whose ids share
their first 10 characters, `middle memory list`, the CLI's messages (add, pin, edit, supersede,
delete, undo) and `history`, the docs API's listing, search, a doc and the answers of its
verbs show each by its 11 characters (and every other doc by 8), so any id seen can be pasted."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from test_doc_id_prefix import SHARED, A, B, middle

from orchestrator.bench.memory_page import PROJECT, bench_project
from orchestrator.memory.format import doc_id, unique_ids
from orchestrator.server import create_app

OTHER = "Ticket 7: tidied module m7, the release check passes."


def _ids(text: str) -> set[str]:
    return set(re.findall(r"\b[0-9a-f]{8,64}\b", text))


def test_unique_ids_tell_every_pair_apart():
    ids = [doc_id(d) for d in (A, B, OTHER)]
    shown = unique_ids(ids)
    assert shown[doc_id(A)] == doc_id(A)[:11] and shown[doc_id(B)] == doc_id(B)[:11]
    assert shown[doc_id(OTHER)] == doc_id(OTHER)[:8]


def test_the_cli_shows_ids_that_tell_the_two_apart(tmp_path):
    bench_project(tmp_path)
    a, b = doc_id(A)[:11], doc_id(B)[:11]
    assert f"(id {doc_id(A)[:8]})" in middle(tmp_path, "add", A).stdout  # alone: 8 tell it apart
    added = middle(tmp_path, "add", B).stdout
    assert f"(id {b})" in added, added
    listed = middle(tmp_path, "list").stdout
    assert a in _ids(listed) and b in _ids(listed) and SHARED[:8] not in _ids(listed), listed
    assert f"doc {a}:" in middle(tmp_path, "pin", a).stdout
    edited = middle(tmp_path, "edit", b, "--text", OTHER).stdout
    assert f"edited doc {b}: it is now {doc_id(OTHER)[:8]}" in edited, edited
    undone = middle(tmp_path, "undo", re.search(r"change (\d+)", edited).group(1)).stdout
    assert f"doc {b})" in undone, undone
    history = middle(tmp_path, "history").stdout
    assert a in _ids(history) and b in _ids(history) and SHARED[:8] not in _ids(history), history
    replaced = middle(tmp_path, "supersede", b, "--with", "Rule: deploys wait for two checks.").stdout
    assert f"doc {b} is superseded by" in replaced, replaced
    assert f"deleted doc {a} " in middle(tmp_path, "delete", a).stdout


def test_the_api_shows_ids_that_tell_the_two_apart(tmp_path):
    config = bench_project(tmp_path)
    app = create_app(config)
    a, b = doc_id(A)[:11], doc_id(B)[:11]
    base = f"/api/projects/{PROJECT}/memory"
    with TestClient(app, base_url="http://127.0.0.1") as client:
        app.state.middle.memory().index(PROJECT, [A, OTHER])
        added = client.post(f"{base}/docs", json={"text": B}).json()
        assert added["id"] == b, added
        listed = client.get(f"{base}/docs").json()["docs"]
        assert {d["id"] for d in listed} == {a, b, doc_id(OTHER)[:8]}
        found = client.get(f"{base}/search", params={"q": "deploys wait release check"}).json()["results"]
        assert {h["id"] for h in found} >= {a, b}
        assert client.post(f"{base}/docs/{a}/pin").json()["id"] == a
        shown = client.get(f"{base}/docs/{a}").json()
        assert shown["short_id"] == a and a in shown["changes"][0]["text"]
        replaced = client.post(f"{base}/docs/{b}/supersede", json={"text": "Rule: two checks."}).json()
        assert replaced["old_id"] == b
        page = client.get(f"/projects/{PROJECT}/memory").text
        assert a in page and f"[{SHARED[:8]}]" not in page


def test_show_names_the_supersede_links_by_ids_that_tell_them_apart(tmp_path):
    bench_project(tmp_path)
    middle(tmp_path, "add", A)
    old = "Rule: deploys wait for the release check on Fridays."
    middle(tmp_path, "add", old)
    # B replaces it while A shares its first 10 characters: `show` names B by 11
    middle(tmp_path, "supersede", doc_id(old)[:8], "--with", B)
    shown = middle(tmp_path, "show", doc_id(old)[:8]).stdout
    assert f"superseded by: {doc_id(B)[:11]} " in shown, shown
    assert f"superseded {doc_id(old)[:8]} by {doc_id(B)[:11]}" in shown, shown  # its changes too
    assert f"supersedes: {doc_id(old)[:8]}:" in middle(tmp_path, "show", doc_id(B)[:11]).stdout


def test_a_bulk_change_lists_the_docs_it_takes_by_ids_that_tell_them_apart(tmp_path):
    bench_project(tmp_path)
    middle(tmp_path, "add", A)
    middle(tmp_path, "add", B)
    listed = middle(tmp_path, "delete", "--containing", "deploys wait", "--yes").stderr
    assert f"  {doc_id(A)[:11]}  Rule 185798" in listed and f"  {doc_id(B)[:11]}  Rule 304662" in listed, listed
