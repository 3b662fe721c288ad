"""The fake GitHub API answers as GitHub does, and records what it was sent."""

from __future__ import annotations

import httpx
import pytest

from orchestrator.testing.fake_github import FakeGitHub


def _client(fake: FakeGitHub, token: str | None = None) -> httpx.Client:
    return httpx.Client(base_url=fake.url, headers={"Authorization": f"Bearer {token or fake.token}"})


def test_issue_lists_page_with_link_headers_and_include_pull_requests(github):
    github.max_per_page = 2
    for n in range(5):
        github.add_issue("me/app", f"Issue {n}")
    github.add_issue("me/app", "A pull request", pull_request=True)
    with _client(github) as http:
        seen, url = [], "/repos/me/app/issues?per_page=100"
        while url:
            resp = http.get(url)
            assert resp.status_code == 200
            seen += resp.json()
            url = resp.links.get("next", {}).get("url")
    assert len(seen) == 6 and sum("pull_request" in i for i in seen) == 1
    assert [r.query.get("page") for r in github.requests] == [None, "2", "3"]


def test_label_milestone_and_state_filters(github):
    github.add_issue("me/app", "Bug in v1", labels=["bug", "ui"], milestone="v1")
    github.add_issue("me/app", "Bug", labels=["bug"])
    github.add_issue("me/app", "Closed bug", labels=["bug"], state="closed")
    with _client(github) as http:
        titles = lambda **q: sorted(i["title"] for i in http.get("/repos/me/app/issues", params=q).json())  # noqa: E731
        assert titles(labels="bug") == ["Bug", "Bug in v1"]
        assert titles(labels="bug,ui") == ["Bug in v1"]
        assert titles(milestone="1") == ["Bug in v1"]
        assert titles(state="all", labels="bug") == ["Bug", "Bug in v1", "Closed bug"]
        assert http.get("/repos/me/app/milestones").json()[0]["title"] == "v1"


def test_etag_gives_304_and_costs_no_rate_limit(github):
    github.add_issue("me/app", "One")
    with _client(github) as http:
        first = http.get("/repos/me/app/issues")
        left = int(first.headers["X-RateLimit-Remaining"])
        again = http.get("/repos/me/app/issues", headers={"If-None-Match": first.headers["ETag"]})
        assert again.status_code == 304 and again.content == b""
        assert int(again.headers["X-RateLimit-Remaining"]) == left
        github.update_issue("me/app", 1, title="One, renamed")
        assert http.get("/repos/me/app/issues", headers={"If-None-Match": first.headers["ETag"]}).status_code == 200


def test_a_used_up_rate_limit_is_a_403_or_429_with_its_headers(github):
    github.add_repo("me/app")
    github.exhaust_rate_limit(reset_in=3600)
    with _client(github) as http:
        resp = http.get("/repos/me/app/issues")
        assert resp.status_code == 403 and resp.headers["X-RateLimit-Remaining"] == "0"
        assert int(resp.headers["X-RateLimit-Reset"]) > 0
        github.exhaust_rate_limit(reset_in=3600, status=429)
        assert http.get("/repos/me/app/issues").status_code == 429


def test_pull_requests_are_created_once_per_head_and_their_state_read(github):
    github.add_repo("me/app")
    with _client(github) as http:
        made = http.post("/repos/me/app/pulls", json={"title": "T", "head": "middle/gh-1", "base": "main", "body": "B"})
        assert made.status_code == 201 and made.json()["html_url"].endswith(f"/pull/{made.json()['number']}")
        twice = http.post("/repos/me/app/pulls", json={"title": "T", "head": "middle/gh-1", "base": "main"})
        assert twice.status_code == 422 and "already exists" in twice.text
        number = made.json()["number"]
        assert http.get("/repos/me/app/pulls", params={"head": "me:middle/gh-1"}).json()[0]["number"] == number
        github.set_pull_state("me/app", number, "merged")
        pr = http.get(f"/repos/me/app/pulls/{number}").json()
        assert pr["state"] == "closed" and pr["merged"] is True
    sent = github.requests_to("/repos/me/app/pulls", "POST")[0]
    assert sent.body == {"title": "T", "head": "middle/gh-1", "base": "main", "body": "B"}
    assert sent.headers["authorization"] == f"Bearer {github.token}"


def test_comments(github):
    github.add_issue("me/app", "One")
    with _client(github) as http:
        assert http.post("/repos/me/app/issues/1/comments", json={"body": "hi"}).status_code == 201
        assert [c["body"] for c in http.get("/repos/me/app/issues/1/comments").json()] == ["hi"]


@pytest.mark.parametrize("status", [401, 404, 500, 502])
def test_switches_make_it_fail(github, status):
    github.add_repo("me/app")
    github.fail(status, times=1)
    with _client(github) as http:
        assert http.get("/repos/me/app/issues").status_code == status
        assert http.get("/repos/me/app/issues").status_code == 200  # `times` used up


def test_a_wrong_token_is_401_and_an_unknown_repo_404(github):
    github.add_repo("me/app")
    with _client(github, token="wrong") as http:
        assert http.get("/repos/me/app/issues").status_code == 401
    with _client(github) as http:
        assert http.get("/repos/me/other/issues").status_code == 404
