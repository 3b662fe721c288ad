"""The board's catalog kept up to date by the writes themselves (issue 38): a write in another
process (`middle memory add`, `delete`, `pin` in another terminal) shows on the server's next
page with the kept listing caught up, not listed again; a catalog caught up lists what a fresh
one does; a log started over or broken means one listing again, never a wrong page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from fastapi.testclient import TestClient

from orchestrator.bench.memory_page import AUTHORS, PROJECT, bench_project, doc_text, fill_memory
from orchestrator.memory.catalog import DocQuery, build_catalog
from orchestrator.memory.format import doc_id
from orchestrator.server import create_app

DOCS = f"/api/projects/{PROJECT}/memory/docs"
SIZE = 300


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Any, Path]]:
    config = bench_project(tmp_path)
    app = create_app(config)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        state = app.state.middle
        fill_memory(state.memory(), state.store, PROJECT, 0, SIZE)
        yield client, state, tmp_path / "middle.toml"


def _kept(state: Any) -> Any:
    return state.catalogs[PROJECT]


def _middle(config: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "--config", str(config),
                           "memory", *args, "--project", PROJECT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_write_in_another_process_shows_on_the_next_page_without_listing_again(served):
    client, state, config = served
    first = client.get(DOCS, params={"sort": "newest"}).json()
    assert first["total"] == SIZE
    catalog = _kept(state)

    _middle(config, "add", "Sessions now use JWT, added in another terminal.")
    page = client.get(DOCS, params={"sort": "newest"}).json()
    assert page["total"] == SIZE + 1
    assert page["docs"][0]["text"] == "Sessions now use JWT, added in another terminal."
    assert page["docs"][0]["source"] == "hand"  # its origin, joined from the ticket store
    assert _kept(state) is catalog  # caught up, not listed again

    gone, pinned = doc_text(7), doc_text(8)
    _middle(config, "delete", doc_id(gone)[:8])
    _middle(config, "pin", doc_id(pinned)[:8])
    texts = {d["text"] for d in client.get(DOCS, params={"limit": 500}).json()["docs"]}
    assert gone not in texts and len(texts) == SIZE
    assert pinned in {d["text"] for d in client.get(DOCS, params={"pinned": "true"}).json()["docs"]}
    assert _kept(state) is catalog


def test_a_caught_up_catalog_lists_what_a_fresh_one_does(served):
    client, state, _ = served
    queries = [DocQuery(limit=500), DocQuery(sort="newest", limit=500), DocQuery(pinned=True, limit=500),
               DocQuery(superseded=False, sort="oldest", limit=500)]
    mem, curator = state.memory(), state.services.curator()
    kept = build_catalog(mem, state.store, PROJECT)
    for q in queries:  # listings kept, so the writes below move rows within them
        kept.page(q)
    curator.add(PROJECT, "The deploy script lives in ops/deploy.sh.", AUTHORS[0])
    curator.pin(PROJECT, doc_id(doc_text(3))[:8], AUTHORS[1], True)
    curator.forget(PROJECT, doc_id(doc_text(4))[:8], AUTHORS[1])
    undone = curator.forget(PROJECT, doc_id(doc_text(5))[:8], AUTHORS[1])
    curator.undo(PROJECT, undone.change, AUTHORS[1])  # deleted, then back
    curator.supersede(PROJECT, doc_id(doc_text(6))[:8], "Task 6 is done differently now.", AUTHORS[0])
    curator.edit(PROJECT, doc_id(doc_text(9))[:8], "Task 9, reworded.", AUTHORS[0])
    mem.index(PROJECT, ["A doc a ticket indexed."])
    from orchestrator.memory.catalog import catch_up

    assert catch_up(kept, mem, state.store, PROJECT)
    fresh = build_catalog(mem, state.store, PROJECT)
    for q in queries:  # the same docs, each described alike (docs dated alike may tie in order)
        got, want = kept.page(q), fresh.page(q)
        assert got["matched"] == want["matched"], q
        assert sorted(got["docs"], key=lambda d: d["id"]) == sorted(want["docs"], key=lambda d: d["id"]), q
    assert kept.counts() == fresh.counts()


def test_a_log_started_over_or_broken_lists_the_store_again(served, caplog):
    client, state, config = served
    client.get(DOCS)
    catalog = _kept(state)
    mem = state.memory()
    mem.index(PROJECT, [f"bulk import doc {i}" for i in range(5_001)])  # too many to note: starts over
    assert client.get(DOCS).json()["total"] == SIZE + 5_001
    assert _kept(state) is not catalog
    catalog = _kept(state)
    mem.index(PROJECT, ["the next write after the log started over"])  # caught up again
    assert client.get(DOCS).json()["total"] == SIZE + 5_002 and _kept(state) is catalog
    log = mem.change_log(PROJECT)
    log.path.write_bytes(b"not a database at all")  # damaged by hand
    mem.index(PROJECT, ["written while the log was broken"])
    page = client.get(DOCS, params={"sort": "newest"}).json()
    assert page["docs"][0]["text"] == "written while the log was broken"
    assert _kept(state) is not catalog  # listed again, and said in the log
    assert "memory change log" in caplog.text


def test_a_ticket_s_doc_is_caught_up_with_its_ticket(serve, tmp_path):
    """A ticket's completion doc (indexed, then recorded in the ticket store) shows with its
    ticket on the next page, the kept listing caught up."""
    from server_helpers import make_project

    served = serve(make_project(tmp_path))
    c, state = served.client, served.app.state.middle
    state.sync_folder()
    c.post("/api/projects/calc/memory/docs", json={"text": "A doc by hand first."})
    assert c.get("/api/projects/calc/memory/docs").json()["total"] == 1
    catalog = state.catalogs["calc"]
    doc = "Ticket: Greeting. The greeting says hello."
    state.memory().index("calc", [doc])  # as a ticket's completion does
    state.store.add_memory_doc("001-greeting", "calc", doc)
    page = c.get("/api/projects/calc/memory/docs", params={"source": "ticket"}).json()
    assert [(d["text"], [t["ticket_id"] for t in d["tickets"]]) for d in page["docs"]] == [(doc, ["001-greeting"])]
    assert state.catalogs["calc"] is catalog
