"""The dashboard's HTML as served: untrusted text escaped, http(s) links only, pages and docs offline."""

from __future__ import annotations

import re

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
    assert board.text.count('class="column"') == 9 and 'data-ticket="001-greeting"' in board.text
    assert re.search(r'<tr data-project="calc">.*?<td>3</td>', board.text, re.S)
    assert 'src="/static/app.js"' in board.text and "http://" not in board.text.split("<body")[0]
    ticket = c.get("/tickets/001-greeting", headers=HTML).text
    assert 'data-action="run"' in ticket and "Never run." in ticket and 'id="live"' in ticket
    c.post("/api/projects/calc/memory/index", json={"docs": ["the greeting module greets users"]})
    memory = c.get("/projects/calc/memory", params={"q": "greeting"}, headers=HTML).text
    assert "keyword" in memory and 'class="score"' in memory and "added by hand" in memory
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
