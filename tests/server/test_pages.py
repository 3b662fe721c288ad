"""The dashboard's HTML as served: untrusted text escaped, http(s) links only, pages and docs offline."""

from __future__ import annotations

import re

from server_helpers import complete_by_hand

from orchestrator.server.render import linkify

HTML = {"Accept": "text/html"}


def test_linkify_escapes_first_and_links_only_http_urls():
    out = str(linkify('see https://example.com/a?b=1&c=2. <script>x</script> javascript:alert(1) '
                      '"http://q.example/"onmouseover=1'))
    assert '<a href="https://example.com/a?b=1&amp;c=2" rel="noopener noreferrer nofollow"' in out
    assert "<script>" not in out and "&lt;script&gt;x&lt;/script&gt;" in out
    assert 'href="javascript' not in out
    assert 'href="http://q.example/"' in out and "onmouseover=1</a>" not in out


def test_stored_text_is_escaped_on_every_page(server, project):
    evil = '<img src=x onerror="alert(1)">'
    c = server.client
    created = c.post("/api/tickets", json={"title": f"Evil {evil}", "project": "calc",
                                           "description": f"Read https://example.com/docs then {evil}"})
    tid = created.json()["id"]
    c.post("/api/projects/calc/memory/index", json={"docs": [f"memory with {evil} and https://example.org/x"]})
    pages = [c.get("/", headers=HTML).text, c.get(f"/tickets/{tid}", headers=HTML).text,
             c.get("/projects/calc/memory?q=memory", headers=HTML).text, c.get(f"/share/tickets/{tid}").text]
    for html in pages:
        assert "<img src=x" not in html
        assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in html or "&lt;img src=x onerror=" in html
    assert '<a href="https://example.com/docs"' in pages[1]
    assert '<a href="https://example.org/x"' in pages[2]
    assert 'data-doc="memory with &lt;img src=x onerror=&#34;alert(1)&#34;&gt; and https://example.org/x"' in pages[2]


def test_board_ticket_and_memory_pages_show_their_parts(server):
    c = server.client
    board = c.get("/", headers=HTML)
    assert board.status_code == 200
    assert board.text.count('<section class="column') == 9 and 'data-ticket="001-greeting"' in board.text
    assert re.search(r'<tr data-project="calc">.*?<td data-label="Tickets">3</td>', board.text, re.S)
    assert 'src="/static/app.js"' in board.text and "http://" not in board.text.split("<body")[0]
    ticket = c.get("/tickets/001-greeting", headers=HTML).text
    assert 'data-action="run"' in ticket and "Never run." in ticket and 'id="live"' in ticket
    c.post("/api/projects/calc/memory/index", json={"docs": ["the greeting module greets users"]})
    memory = c.get("/projects/calc/memory", params={"q": "greeting"}, headers=HTML).text
    assert "bm25" in memory and 'class="score"' in memory and "added through the HTTP API" in memory
    assert c.get("/projects/bad%20id/memory", headers=HTML).status_code == 400
    missing = c.get("/tickets/nope", headers=HTML)
    assert missing.status_code == 404 and "<h1>Error 404</h1>" in missing.text
    assert c.get("/memory", follow_redirects=False).headers["location"] == "/projects/calc/memory"


def test_openapi_lists_every_route_and_docs_need_no_cdn(server):
    spec = server.client.get("/openapi.json").json()
    paths = set(spec["paths"])
    for route in ("index", "retrieve", "delete", "edit", "docs", "search", "stats"):
        assert f"/api/projects/{{project_id}}/memory/{route}" in paths
    for path in ("/api/tickets", "/api/tickets/{ticket_id}", "/api/tickets/{ticket_id}/run",
                 "/api/tickets/{ticket_id}/resume", "/api/tickets/{ticket_id}/revert", "/api/runs/{run_id}",
                 "/api/runs/{run_id}/stream", "/api/tickets/{ticket_id}/stream", "/api/events/stream",
                 "/api/projects", "/api/health"):
        assert path in paths, path
    docs = server.client.get("/docs").text
    assert "https://" not in docs
    assert server.client.get("/static-offline-docs/swagger-ui-bundle.js").status_code == 200


def _documented(spec: dict, path: str, method: str) -> dict:
    return spec["paths"][path][method.lower()]["responses"]


def test_openapi_documents_the_errors_the_api_answers(serve, server, tmp_path):
    from server_helpers import make_project

    spec = server.client.get("/openapi.json").json()
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    error_schemas = {f"#/components/schemas/{name}"
                     for name in ("ErrorBody", "ReviewConflictBody", "UntrackedFilesBody")}
    assert set(spec["components"]["schemas"]["ReviewConflictBody"]["required"]) >= {"error", "conflicts"}
    assert "worktree" in spec["components"]["schemas"]["ReviewConflictBody"]["properties"]
    for path, item in spec["paths"].items():
        for method, op in item.items():
            responses = op["responses"]
            assert "422" not in responses, (method, path)  # a bad request is a 400 {"error"}
            takes_input = "requestBody" in op or any(p["in"] == "query" for p in op.get("parameters", []))
            if takes_input:
                assert "400" in responses, (method, path)
            for code, response in responses.items():
                if int(code) >= 400:
                    ref = response["content"]["application/json"]["schema"]["$ref"]
                    assert ref in error_schemas, (method, path, code)

    off = serve(make_project(tmp_path / "off", backend=None))
    server.client.post("/api/tickets", json={"title": "Twice", "project": "calc", "id": "009-twice"})
    cases = [  # (client, method, url, json body, the route in the spec, the status it answers)
        (server, "POST", "/api/projects/calc/memory/index", {"docs": "one string"},
         "/api/projects/{project_id}/memory/index", 400),
        (server, "POST", "/api/projects/a%20b/memory/retrieve", {"queries": ["x"]},
         "/api/projects/{project_id}/memory/retrieve", 400),
        (server, "GET", "/api/projects/calc/memory/search?q=x&k=0", None,
         "/api/projects/{project_id}/memory/search", 400),
        (server, "POST", "/api/projects/calc/memory/edit", {"old": "never indexed", "new": "x"},
         "/api/projects/{project_id}/memory/edit", 404),
        (off, "GET", "/api/projects/calc/memory/docs", None, "/api/projects/{project_id}/memory/docs", 503),
        (server, "GET", "/api/tickets?status=bogus", None, "/api/tickets", 400),
        (server, "POST", "/api/tickets", {"title": "Twice", "project": "calc", "id": "009-twice"},
         "/api/tickets", 409),
        (server, "POST", "/api/tickets", {"project": "calc"}, "/api/tickets", 400),
        (server, "GET", "/api/tickets/nope", None, "/api/tickets/{ticket_id}", 404),
        (server, "POST", "/api/tickets/nope/run", None, "/api/tickets/{ticket_id}/run", 404),
        (server, "POST", "/api/tickets/001-greeting/run", {"rerun": "maybe"}, "/api/tickets/{ticket_id}/run", 400),
        (server, "POST", "/api/tickets/001-greeting/resume", None, "/api/tickets/{ticket_id}/resume", 400),
        (server, "POST", "/api/tickets/001-greeting/merge", None, "/api/tickets/{ticket_id}/merge", 400),
        (server, "GET", "/api/tickets/001-greeting/diff", None, "/api/tickets/{ticket_id}/diff", 400),
        (server, "GET", "/api/runs/nope", None, "/api/runs/{run_id}", 404),
        (server, "GET", "/api/runs/nope/events?after=-1", None, "/api/runs/{run_id}/events", 400),
        (server, "GET", "/api/tickets/nope/stream", None, "/api/tickets/{ticket_id}/stream", 404),
        (server, "GET", "/api/events/stream?after=x", None, "/api/events/stream", 400),
    ]
    for served, method, url, body, route, status in cases:
        r = served.client.request(method, url, json=body)
        assert r.status_code == status, (method, url, r.text)
        assert set(r.json()) == {"error"} and r.json()["error"], (method, url, r.text)
        assert str(status) in _documented(spec, route, method), (method, route, status)
    refused = server.client.get("/api/tickets", headers={"Host": "example.com"})
    assert refused.status_code == 403 and "loopback" in refused.json()["error"]
    assert "403" in _documented(spec, "/api/tickets", "GET")


def test_a_description_is_rendered_markdown_with_no_raw_html(server):
    description = ("## Steps\n\n1. Create `calc/sub.py`\n2. **Test** it against [the spec](https://example.com/spec)\n\n"
                   "<script>alert(1)</script>\n\n<img src=x onerror=\"alert(2)\">\n\n"
                   "[click me](javascript:alert(3)), <javascript:alert(4)>, [data](data:text/html,hi) "
                   "and https://example.org/bare.\n\n![logo](https://example.net/logo.png)")
    created = server.client.post("/api/tickets", json={"title": "Markdown", "project": "calc",
                                                       "description": description})
    page = server.client.get(f"/tickets/{created.json()['id']}", headers=HTML).text
    section = page[page.index('id="desc-h"'):page.index("</section>", page.index('id="desc-h"'))]
    assert "<h4>Steps</h4>" in section  # below the page's own h1 and h2
    assert "<ol>" in section and "<code>calc/sub.py</code>" in section and "<strong>Test</strong>" in section
    assert (
        '<a href="https://example.com/spec" rel="noopener noreferrer nofollow" target="_blank">the spec</a>' in section
    )
    assert '<a href="https://example.org/bare" rel="noopener noreferrer nofollow"' in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section and "<script" not in section
    assert "<img" not in page and "&lt;img src=x onerror=" in section
    assert re.findall(r'href="([^"]*)"', section) == [
        "https://example.com/spec",
        "https://example.org/bare",
        "https://example.net/logo.png",
    ]
    assert "[click me](javascript:alert(3))" in section  # shown as the text it is, not a link


def _change_header(html: str) -> str:
    found = re.search(r'<h2 id="diff-h">(.*?)</h2>', html, re.S)
    assert found, "the page has no change header"
    return found.group(1)


def test_the_change_of_a_reverted_ticket_says_reverted_not_merged(server):
    c = server.client
    complete_by_hand(server.state, "001-greeting", {"hello.txt": "hello\n"})
    assert c.post("/api/tickets/001-greeting/merge").json()["status"] == "merged"
    merged = _change_header(c.get("/tickets/001-greeting", headers=HTML).text)
    assert merged.endswith("· merged</span>")
    reverted = c.post("/api/tickets/001-greeting/revert").json()
    assert reverted["status"] == "reverted"
    header = _change_header(c.get("/tickets/001-greeting", headers=HTML).text)
    assert f"· merged, then reverted by <code>{reverted['commit'][:10]}</code>" in header
    assert not header.endswith("· merged</span>")


def test_a_ticket_whose_dependency_names_no_ticket_shows_the_problem_on_its_card(server, project):
    folder = project.resolve(project.project.tickets_dir)
    (folder / "blocked.md").write_text(
        "---\ntitle: Needs a ghost\nproject: calc\nid: blocked\ndepends_on: [no-such-ticket]\n---\nBody.\n"
    )
    board = server.client.get("/", headers=HTML).text
    card = re.search(r'<a class="card[^"]*" href="/tickets/blocked".*?</a>', board, re.S).group(0)
    assert 'class="card has-problem"' in card and "Cannot start:" in card
    assert "depends_on names no ticket: &#39;no-such-ticket&#39;" in card
    normal = re.search(r'<a class="card[^"]*" href="/tickets/001-greeting".*?</a>', board, re.S).group(0)
    assert "has-problem" not in normal and "Cannot start" not in normal
