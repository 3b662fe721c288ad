"""The memory API over real HTTP: the memory contract's routes, list/search/edit/stats, validation, failures."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from server_helpers import make_project

from orchestrator.plugin_api import MemoryBackend, hookimpl
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.services import Services

BASE = "/api/projects/calc/memory"


def test_index_retrieve_delete_list_search_stats(server):
    c = server.client
    docs = ["Ticket: Fix login. Users could not sign in. Reset the session cookie.",
            "Ticket: Speed up export. Export was slow. Streamed the CSV rows."]
    r = c.post(f"{BASE}/index", json={"docs": docs})
    assert r.status_code == 200 and r.json() == {"project": "calc", "indexed": 2}

    r = c.post(f"{BASE}/retrieve", json={"queries": ["login cookie", "export csv"], "num_to_retrieve": 1})
    assert r.status_code == 200
    results = r.json()
    assert [x["question"] for x in results] == ["login cookie", "export csv"]
    assert results[0]["docs"] == [docs[0]] and results[1]["docs"] == [docs[1]]
    assert all(len(x["doc_scores"]) == 1 and x["doc_scores"][0] > 0 for x in results)

    listed = c.get(f"{BASE}/docs").json()
    assert listed["backend"] == "bm25" and listed["count"] == 2
    assert [d["text"] for d in listed["docs"]] == docs and listed["docs"][0]["tickets"] == []

    found = c.get(f"{BASE}/search", params={"q": "session cookie", "k": 5}).json()
    assert found["recall"] == "relevance" and found["results"][0]["doc"] == docs[0]
    assert found["results"][0]["score"] > 0

    stats = c.get(f"{BASE}/stats").json()
    assert stats["backend"] == "bm25" and stats["docs"] == 2
    assert stats["store_bytes"] > 0 and stats["last_write"]

    r = c.post(f"{BASE}/delete", json={"docs": [docs[0], "not there"]})
    assert r.json() == {"project": "calc", "deleted": 1}
    assert [d["text"] for d in c.get(f"{BASE}/docs").json()["docs"]] == [docs[1]]


@pytest.mark.installed_plugins
def test_a_plugin_backend_serves_the_memory_api(serve, tmp_path):
    """The server uses whatever backend the registry has, a third-party plugin's too."""
    pytest.importorskip("middle_agent_keyword_memory", reason="the example plugin is not installed "
                        "(pip install ./plugins/middle-agent-keyword-memory); the other server tests "
                        "use the built-in bm25 backend")
    c = serve(make_project(tmp_path, backend="keyword")).client
    assert c.post(f"{BASE}/index", json={"docs": ["the login cookie expired", "export streams CSV"]}).status_code == 200
    found = c.get(f"{BASE}/search", params={"q": "login cookie"}).json()
    assert found["backend"] == "keyword" and found["results"][0]["doc"] == "the login cookie expired"
    assert c.get(f"{BASE}/stats").json()["backend"] == "keyword"
    assert c.get("/api/health").json()["memory_backend"] == "keyword"


def test_edit_replaces_one_doc_and_refuses_unknown_text(server):
    c = server.client
    c.post(f"{BASE}/index", json={"docs": ["old wording of a memory"]})
    r = c.post(f"{BASE}/edit", json={"old": "old wording of a memory", "new": "new wording of a memory"})
    assert r.status_code == 200 and r.json()["new"] == "new wording of a memory"
    assert [d["text"] for d in c.get(f"{BASE}/docs").json()["docs"]] == ["new wording of a memory"]

    r = c.post(f"{BASE}/edit", json={"old": "never indexed", "new": "whatever"})
    assert r.status_code == 404 and "exactly that text" in r.json()["error"]
    r = c.post(f"{BASE}/edit", json={"old": "new wording of a memory", "new": "   "})
    assert r.status_code == 400 and "empty" in r.json()["error"]
    assert [d["text"] for d in c.get(f"{BASE}/docs").json()["docs"]] == ["new wording of a memory"]


def test_read_only_calls_on_a_new_project_create_nothing(server, project):
    c = server.client
    assert c.get("/api/projects/fresh/memory/docs").json()["count"] == 0
    assert c.get("/api/projects/fresh/memory/search", params={"q": "x"}).json()["results"] == []
    assert c.get("/api/projects/fresh/memory/stats").json()["docs"] == 0
    r = c.post("/api/projects/nosuch/memory/retrieve", json={"queries": ["x"]})
    assert r.status_code == 200 and r.json() == [{"question": "x", "docs": [], "doc_scores": []}]
    assert c.post("/api/projects/nosuch/memory/retrieve", json={"queries": "x"}).status_code == 400
    assert not (project.memory_dir / "fresh").exists() and not (project.memory_dir / "nosuch").exists()
    assert not list(project.memory_dir.rglob("*fresh*")) and not list(project.memory_dir.rglob("*nosuch*"))


def test_read_only_calls_never_create_the_store_of_another_backend(serve, tmp_path):
    """A project whose memory lives in one backend's store, read under another backend."""
    config = make_project(tmp_path, backend="bm25")
    first = serve(config)
    assert first.client.post(f"{BASE}/index", json={"docs": ["kept in bm25"]}).status_code == 200
    first.close()
    store = config.memory_dir / "calc"
    before = sorted(p.name for p in store.iterdir())
    (tmp_path / "middle.toml").write_text(
        (tmp_path / "middle.toml").read_text().replace('backend = "bm25"', 'backend = "dense"'))
    from orchestrator.config.settings import load_config

    second = serve(load_config(tmp_path / "middle.toml", environ={}))
    c = second.client
    assert c.post(f"{BASE}/retrieve", json={"queries": ["kept"]}).json()[0]["docs"] == []
    assert c.get(f"{BASE}/docs").json()["count"] == 0
    assert c.get(f"{BASE}/search", params={"q": "kept"}).json()["results"] == []
    assert c.get(f"{BASE}/stats").json()["docs"] == 0
    assert sorted(p.name for p in store.iterdir()) == before  # no dense.sqlite3


@pytest.mark.parametrize("pid", ["a b", ".hidden", "x" * 101, "%2E%2E", "%2E%2Essh", "semi;colon"])
def test_bad_project_id_is_a_400_with_the_message_and_no_path(server, project, pid):
    for method, route, body in [("post", "index", {"docs": ["x"]}), ("post", "retrieve", {"queries": ["x"]}),
                                ("post", "delete", {"docs": ["x"]}), ("get", "docs", None),
                                ("get", "stats", None)]:
        r = server.client.request(method.upper(), f"/api/projects/{pid}/memory/{route}", json=body)
        assert r.status_code == 400, (pid, route, r.text)
        message = r.json()["error"]
        assert message.startswith("project id") and "no '/'" in message
        assert str(project.root) not in message and "/memory" not in message


@pytest.mark.parametrize("body, expected", [
    (b"{not json", "not valid JSON"),
    (b"[]", "must be a JSON object"),
    (b"{}", "docs is required"),
    (b'{"docs": "one string"}', "docs must be a list"),
    (b'{"docs": [1]}', "docs[0] is int"),
    (b'{"docs": ["ok"], "extra": 1}', "unknown field 'extra'"),
])
def test_bad_bodies_are_400_with_the_facade_message(server, body, expected):
    r = server.client.post(f"{BASE}/index", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert expected in r.json()["error"]


def test_bad_retrieve_arguments(server):
    c = server.client
    r = c.post(f"{BASE}/retrieve", json={"queries": ["x"], "num_to_retrieve": 0})
    assert r.status_code == 400 and "num_to_retrieve must be a whole number of at least 1" in r.json()["error"]
    r = c.post(f"{BASE}/retrieve", json={"queries": "x"})
    assert r.status_code == 400 and "queries must be a list" in r.json()["error"]
    assert c.post(f"{BASE}/index", json={"docs": ["alpha doc", "beta doc"]}).status_code == 200
    for huge in (10**20, 2**63, 10_001):  # past a C integer once reached FAISS: a 503 OverflowError
        r = c.post(f"{BASE}/retrieve", json={"queries": ["alpha"], "num_to_retrieve": huge})
        assert r.status_code == 400 and "at most 10,000" in r.json()["error"], r.text
    r = c.post(f"{BASE}/retrieve", json={"queries": ["alpha"], "num_to_retrieve": 10_000})
    assert r.status_code == 200 and r.json()[0]["docs"][0] == "alpha doc"


def test_concurrent_index_from_many_requests_loses_nothing(server):
    docs = [f"memory number {i} about topic {i * 7}" for i in range(40)]
    errors: list[str] = []

    def send(chunk: list[str]) -> None:
        for doc in chunk:
            r = server.client.post(f"{BASE}/index", json={"docs": [doc]})
            if r.status_code != 200:
                errors.append(r.text)

    threads = [threading.Thread(target=send, args=(docs[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    stored = [d["text"] for d in server.client.get(f"{BASE}/docs", params={"limit": 100}).json()["docs"]]
    assert sorted(stored) == sorted(docs)


def test_memory_off_is_503_and_tickets_still_work(serve, tmp_path):
    served = serve(make_project(tmp_path, backend=None))
    r = served.client.post(f"{BASE}/index", json={"docs": ["x"]})
    assert r.status_code == 503 and "memory is off" in r.json()["error"]
    assert served.client.get("/api/tickets").status_code == 200


class _Broken(MemoryBackend):
    name = "broken"
    description = "Every call fails, like a store on a full or vanished disk."

    def index(self, docs):
        raise OSError("No space left on device")

    def retrieve(self, queries, num_to_retrieve):
        raise OSError("No space left on device")

    def delete(self, docs):
        raise OSError("No space left on device")

    def list_docs(self):
        raise OSError("No space left on device")


class _BrokenPlugin:
    @hookimpl
    def register_memory_backends(self, register):
        register(_Broken)


def test_failing_backend_is_503_and_the_ticket_api_still_works(serve, tmp_path: Path):
    config = make_project(tmp_path, backend="broken")
    services = Services(config, registry=PluginRegistry(extra_plugins=(_BrokenPlugin(),)))
    try:
        served = serve(config, services=services)
        c = served.client
        for method, route, body in [("POST", "index", {"docs": ["x"]}), ("POST", "retrieve", {"queries": ["x"]}),
                                    ("GET", "docs", None)]:
            r = c.request(method, f"{BASE}/{route}", json=body)
            assert r.status_code == 503, r.text
            assert "No space left on device" in r.json()["error"] and "broken" in r.json()["error"]
        assert c.get("/api/tickets").json()["tickets"][0]["id"] == "001-greeting"
        assert c.get("/api/tickets/001-greeting").status_code == 200
        created = c.post("/api/tickets", json={"title": "Still works", "project": "calc"})
        assert created.status_code == 201
        page = c.get("/projects/calc/memory", headers={"Accept": "text/html"})
        assert page.status_code == 503 and "No space left on device" in page.text
    finally:
        served.close()
        services.close()


def test_editing_a_ticket_s_doc_keeps_the_ticket_record_so_revert_deletes_the_edit(server, project):
    from tickets.model import Ticket
    from tickets.store import TicketStore

    c = server.client
    with TicketStore(project.db_path) as store:
        store.upsert_ticket(Ticket(id="t1", project_id="calc", title="Login", project_path=str(project.root)))
        store.add_memory_doc("t1", "calc", "Ticket: Login. Fixed it.")
    c.post(f"{BASE}/index", json={"docs": ["Ticket: Login. Fixed it."]})
    r = c.post(f"{BASE}/edit", json={"old": "Ticket: Login. Fixed it.", "new": "Ticket: Login. Fixed the cookie."})
    assert r.status_code == 200
    with TicketStore(project.db_path) as store:
        assert store.memory_docs("t1") == ["Ticket: Login. Fixed the cookie."]
    assert [t["ticket_id"] for t in c.get(f"{BASE}/docs").json()["docs"][0]["tickets"]] == ["t1"]


def test_a_ticket_that_indexed_a_doc_twice_is_listed_once(server, project):
    from tickets.model import Ticket
    from tickets.store import TicketStore

    doc = "Ticket: Login. Fixed the session cookie."
    with TicketStore(project.db_path) as store:
        store.upsert_ticket(Ticket(id="t1", project_id="calc", title="Login", project_path=str(project.root)))
        store.add_memory_doc("t1", "calc", doc)
        store.mark_memory_docs_deleted("t1")  # reverted ...
        store.add_memory_doc("t1", "calc", doc)  # ... then run again: the same summary, indexed again
    c = server.client
    c.post(f"{BASE}/index", json={"docs": [doc]})
    hit = c.get(f"{BASE}/search", params={"q": "session cookie"}).json()["results"][0]
    assert hit["doc"] == doc and [(s["ticket_id"], s["deleted_at"]) for s in hit["tickets"]] == [("t1", None)]
    listed = c.get(f"{BASE}/docs").json()["docs"][0]
    assert [s["ticket_id"] for s in listed["tickets"]] == ["t1"]
    page = c.get("/projects/calc/memory", params={"q": "session cookie"}, headers={"Accept": "text/html"}).text
    results = page[page.index('id="results"'):page.index("</ol>", page.index('id="results"'))]
    assert results.count('href="/tickets/t1"') == 1 and "(reverted)" not in page


# -- issue 29: limits. A body over the server's limit, a doc over max_doc_chars and a query over
# max_query_chars are refused before any memory work, saying the limit. -----------------------

@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_the_limit_is_a_413_before_any_memory_work(serve, project, chunked):
    c = serve(project, max_body_bytes=64 * 1024).client
    body = b'{"docs": ["' + b"y" * (64 * 1024) + b'"]}'
    content = iter([body[:40_000], body[40_000:]]) if chunked else body
    r = c.post(f"{BASE}/index", content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert r.json()["error"].startswith("the request body is over this server's limit of 65,536 "
                                        "bytes (0.0625 MiB), so nothing was done")
    assert not (project.memory_dir / "calc").exists()  # no store was even opened
    assert c.get(f"{BASE}/stats").json()["docs"] == 0  # the server goes on


def test_the_default_body_limit_is_8_mib(server, project):
    r = server.client.post(f"{BASE}/index", content=b"{" + b" " * (8 * 2**20) + b"}",
                           headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "limit of 8,388,608 bytes (8 MiB)" in r.json()["error"]


def test_a_doc_over_max_doc_chars_is_a_400_and_nothing_changes(server):
    c = server.client
    assert c.post(f"{BASE}/index", json={"docs": ["kept doc"]}).status_code == 200
    r = c.post(f"{BASE}/index", json={"docs": ["short one", "z" * 20_001]})
    assert r.status_code == 400 and r.json()["error"].startswith(
        "a doc of 20,001 characters is over [memory] max_doc_chars (20,000)")
    r = c.post(f"{BASE}/edit", json={"old": "kept doc", "new": "z" * 20_001})
    assert r.status_code == 400 and "max_doc_chars (20,000)" in r.json()["error"]
    assert [d["text"] for d in c.get(f"{BASE}/docs").json()["docs"]] == ["kept doc"]


# -- issue 31: curation over HTTP, under the token --------------------------------------------

def test_curation_verbs_over_http_each_recorded_and_undoable(serve, tmp_path):
    token = "t" * 24
    c = serve(make_project(tmp_path), token=token).client
    auth = {"Authorization": f"Bearer {token}"}
    assert c.post(f"{BASE}/docs", json={"text": "Sessions use cookies."}).status_code == 401
    added = c.post(f"{BASE}/docs", json={"text": "Sessions use cookies."}, headers=auth).json()
    ident = added["id"]
    assert added["change"] == 1 and len(ident) == 8
    edited = c.post(f"{BASE}/docs/{ident}/edit", json={"text": "Sessions use signed cookies."},
                    headers=auth).json()
    new_id = edited["id"]
    assert edited["old_id"] == ident and edited["doc"] == "Sessions use signed cookies."
    sup = c.post(f"{BASE}/docs/{new_id}/supersede", json={"text": "Sessions use JWT tokens now."},
                 headers=auth)
    assert sup.status_code == 200, sup.text
    again = c.post(f"{BASE}/docs/{new_id}/supersede", json={"text": "x"}, headers=auth)
    assert again.status_code == 400 and "already superseded by" in again.json()["error"]
    assert c.post(f"{BASE}/docs/{sup.json()['id']}/pin", headers=auth).json()["message"] == "pinned"
    shown = c.get(f"{BASE}/docs/{new_id}", headers=auth).json()
    assert shown["superseded_by"]["doc"] == "Sessions use JWT tokens now."
    assert shown["from"].startswith("added by hand") and "api " in shown["from"]
    assert [ch["action"] for ch in shown["changes"]] == ["supersede", "edit", "add"]
    found = c.get(f"{BASE}/search", params={"q": "sessions cookies", "explain": "true"},
                  headers=auth).json()["results"]
    assert [h["doc"] for h in found[:2]] == ["Sessions use JWT tokens now.", "Sessions use signed cookies."]
    assert found[1]["superseded_by"] == sup.json()["id"] and "superseded by" in found[1]["why"]
    assert "pinned" in found[0]["why"] and "keywords sessions" in found[0]["why"]
    for method, route, body, status, words in [
            ("GET", "docs/zz", None, 404, "exactly that text"),
            ("POST", "docs/abcdef12/pin", None, 404, "an id starting 'abcdef12'"),
            ("POST", f"docs/{new_id}/edit", {"text": " "}, 400, "the new text is empty"),
            ("POST", "changes/99/undo", None, 404, "no memory change 99")]:
        r = c.request(method, f"{BASE}/{route}", json=body, headers=auth)
        assert r.status_code == status and words in r.json()["error"], (route, r.text)
    changes = c.get(f"{BASE}/changes", headers=auth).json()["changes"]
    assert [ch["action"] for ch in changes] == ["pin", "supersede", "edit", "add"]
    # The one unnamed token: its holder, by the token's name, not an IP address
    assert all(ch["who"] == "api MIDDLE_API_TOKEN" for ch in changes)
    undone = c.post(f"{BASE}/changes/{changes[1]['id']}/undo", headers=auth).json()  # the supersede
    assert undone["message"] == "undid the supersede"
    texts = [d["text"] for d in c.get(f"{BASE}/docs", headers=auth).json()["docs"]]
    assert texts == ["Sessions use signed cookies."]
    forgot = c.post(f"{BASE}/docs/{new_id}/forget", headers=auth).json()
    assert c.get(f"{BASE}/docs", headers=auth).json()["count"] == 0
    c.post(f"{BASE}/changes/{forgot['change']}/undo", headers=auth)
    assert [d["text"] for d in c.get(f"{BASE}/docs", headers=auth).json()["docs"]] == texts
