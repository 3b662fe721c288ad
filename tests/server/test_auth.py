"""The token gate, cross-site refusal, CSRF, share links, and `middle serve`'s address rules."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys

import httpx
import pytest

TOKEN = "s3cret-token-for-tests-0123456789"


def test_without_a_token_cross_site_writes_and_foreign_hosts_are_refused(server):
    c = server.client
    assert c.get("/api/tickets").status_code == 200
    body = {"docs": ["x"]}
    r = c.post("/api/projects/calc/memory/index", json=body, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "cross-site request refused" in r.json()["error"]
    r = c.post("/api/projects/calc/memory/index", json=body, headers={"Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403
    r = c.post("/api/projects/calc/memory/index", json=body, headers={"Sec-Fetch-Site": "same-site"})
    assert r.status_code == 403  # another port of localhost is another origin
    r = c.post("/api/projects/calc/memory/index", json=body,
               headers={"Origin": server.url, "Sec-Fetch-Site": "same-origin"})
    assert r.status_code == 200
    r = c.get("/api/tickets", headers={"Host": "evil.example"})  # a DNS-rebinding page
    assert r.status_code == 403 and "loopback host name" in r.json()["error"]
    assert c.get("/api/tickets", headers={"Host": "localhost:1"}).status_code == 200


def test_with_a_token_every_route_needs_it(serve, project):
    served = serve(project, token=TOKEN)
    c = served.client
    for path in ("/api/tickets", "/api/projects/calc/memory/docs", "/openapi.json", "/api/events/stream"):
        r = c.get(path)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", path
        assert "Authorization: Bearer TOKEN" in r.json()["error"]
    wrong = c.get("/api/tickets", headers={"Authorization": "Bearer wrong"})
    assert wrong.status_code == 401 and wrong.json()["error"].startswith("that token is not one of this server's")
    ok = {"Authorization": f"Bearer {TOKEN}"}
    assert c.get("/api/tickets", headers=ok).status_code == 200
    assert c.post("/api/projects/calc/memory/index", json={"docs": ["x"]}, headers=ok).status_code == 200
    for page in ("/", "/tickets/001-greeting", "/projects/calc/memory", "/docs"):
        r = c.get(page)
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), page
    assert c.get("/static/app.css").status_code == 200  # public: no secrets in it
    assert c.get("/login").status_code == 200


def test_login_cookie_csrf_and_share_links(serve, project):
    served = serve(project, token=TOKEN)
    c = served.client
    r = c.post("/login", data={"token": "wrong", "next": "/"})
    assert r.status_code == 401 and "not this server" in r.text
    r = c.post("/login", data={"token": TOKEN, "next": "//evil.example/"})
    assert r.status_code == 303 and r.headers["location"] == "/"  # no open redirect
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert TOKEN not in cookie
    page = c.get("/tickets/001-greeting")
    assert page.status_code == 200
    csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text).group(1)
    r = c.post("/api/projects/calc/memory/index", json={"docs": ["x"]})
    assert r.status_code == 403 and "CSRF" in r.json()["error"]
    r = c.post("/api/projects/calc/memory/index", json={"docs": ["x"]}, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200
    r = c.post("/api/projects/calc/memory/index", json={"docs": ["x"]},
               headers={"X-CSRF-Token": csrf, "Origin": "http://evil.example"})
    assert r.status_code == 403

    share = re.search(r'href="(/share/tickets/001-greeting\?key=[0-9a-f]+)"', page.text).group(1)
    stranger = httpx.Client(base_url=served.url)
    r = stranger.get(share)
    assert r.status_code == 200 and "read-only view" in r.text
    assert 'data-action="run"' not in r.text and 'name="csrf-token" content=""' in r.text
    assert stranger.get("/share/tickets/001-greeting?key=0000").status_code == 303
    assert stranger.get(share.replace("001-greeting", "002-farewell")).status_code == 303
    assert stranger.get("/api/tickets/001-greeting").status_code == 401
    stranger.close()
    c.post("/logout", headers={"X-CSRF-Token": csrf})
    c.cookies.clear()
    assert c.get("/").status_code == 303


def _middle(*args: str, env: dict[str, str] | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})}, cwd=cwd)


def test_serve_refuses_an_open_address_without_a_token(project):
    env = {k: v for k, v in os.environ.items() if k != "MIDDLE_API_TOKEN"}
    result = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "--config", str(project.source),
                             "serve", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 1
    assert result.stderr.startswith("error: --host 0.0.0.0 can be reached from other machines")
    short = _middle("--config", str(project.source), "serve", "--host", "0.0.0.0",
                    env={"MIDDLE_API_TOKEN": "short"})
    assert short.returncode == 1 and "at least 16" in short.stderr
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        taken = _middle("--config", str(project.source), "serve", "--port", str(busy.getsockname()[1]))
        assert taken.returncode == 1 and "cannot listen on 127.0.0.1" in taken.stderr
    finally:
        busy.close()


def test_middle_serve_runs_and_stops_on_ctrl_c(project):
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli.main", "--config", str(project.source),
                             "serve", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = re.search(r"dashboard (http://127\.0\.0\.1:\d+/)", line).group(1)
        health = httpx.get(url + "api/health", timeout=30).json()
        assert health["ok"] is True and health["memory_backend"] == "bm25"
        assert httpx.get(url + "api/tickets", timeout=30).json()["tickets"][0]["id"] == "001-greeting"
        docs = httpx.get(url + "docs", timeout=30).text
        assert "/static-offline-docs/swagger-ui-bundle.js" in docs and "cdn.jsdelivr" not in docs
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.8.0.1", True), ("::1", True),
                                            ("localhost", True), ("0.0.0.0", False), ("192.168.1.5", False),
                                            ("example.com", False)])
def test_loopback_detection(host, loopback):
    from orchestrator.server.auth import is_loopback

    assert is_loopback(host) is loopback
