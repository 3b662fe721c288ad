"""A local fake of the GitHub REST API (issues, pull requests, comments) that records every request.

It serves the few endpoints middle-agent uses, as GitHub answers them (checked against the REST
docs): issue lists paged with `Link` headers and filtered by `labels`/`milestone`/`state` (pull
requests appear in the issue list, with a `pull_request` key), `X-RateLimit-*` headers and a
403/429 once the limit is used up, `ETag` / `If-None-Match` -> 304 (not counted against the
limit), pull-request creation (422 when one is open for the head branch), pull-request state
(open, closed, merged) and issue comments, check runs and commit statuses of a commit (an Actions
job's log behind a redirect), pull-request reviews and review comments. Switches make it answer 401, 404 or
5xx, delete an
issue (410, or 404), lose a pull request (404), accept a second pull request of a branch, or
hold requests at a gate until several processes have sent them (so a race happens every time).
Use it from a plugin's tests as a context manager::

    with FakeGitHub() as gh:
        gh.add_issue("me/app", "Fix the login bug", labels=["bug"])
        ...  # point [github] api_url at gh.url, GITHUB_TOKEN at gh.token
        assert gh.requests[-1].path == "/repos/me/app/issues"
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from orchestrator.fake_api.local_server import LocalServer, RequestRecord

__all__ = ["FakeGitHub", "GitHubRequest"]


@dataclass
class GitHubRequest(RequestRecord):
    """One request as the fake saw it (header names lower-case), and what the fake answered."""

    status: int = 0  # what the fake answered


@dataclass
class _Repo:
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)  # issues and PRs share numbers
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    milestones: dict[int, dict[str, Any]] = field(default_factory=dict)
    gone: dict[int, int] = field(default_factory=dict)  # issue number -> what GitHub answers now (410, 404)
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # commit sha -> its check runs
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # commit sha -> its statuses
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # pull number -> its reviews
    review_comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # pull number -> inline ones
    job_logs: dict[int, str] = field(default_factory=dict)  # Actions job id -> its log
    next_number: int = 1


class FakeGitHub(LocalServer):
    """Serves the GitHub REST API on 127.0.0.1 (an ephemeral port) from in-memory repositories."""

    _name = "fake GitHub API"

    def __init__(
        self, token: str = "ghp_fake_token", *, per_page: int = 30, max_per_page: int = 100, rate_limit: int = 5000
    ):
        super().__init__()
        self.token = token
        self.per_page = per_page  # GitHub's default page size
        self.max_per_page = max_per_page  # GitHub's largest; lower it to make tests page
        self.rate_limit = rate_limit
        self.remaining = rate_limit
        self.reset_at = int(time.time()) + 3600
        self.requests: list[GitHubRequest] = []
        self.repos: dict[str, _Repo] = {}
        self._failures: list[tuple[int, str, int | None]] = []  # (status, path prefix, times left)
        self._limited: tuple[int, int] | None = None  # (status, reset epoch) once exhausted
        # GitHub answers 422 to a second open pull request of a branch; False: an API that does not.
        self.one_pull_per_branch = True
        self._gates: dict[tuple[str, str], list[Any]] = {}  # (method, path) -> [count, timeout_s, arrived]
        self._gate_moved = threading.Condition()
        self._lock = threading.RLock()

    # --- lifecycle -------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(_Handler):
            github = fake

        return Handler

    def start(self) -> FakeGitHub:
        return super().start()  # type: ignore[no-any-return]

    def __enter__(self) -> FakeGitHub:
        return self.start()

    @property
    def url(self) -> str:
        """The API's base URL, as `[github] api_url` takes it."""
        return f"http://127.0.0.1:{self._port}"

    # --- what the tests set up ---------------------------------------------------------------

    def add_repo(self, repo: str) -> _Repo:
        with self._lock:
            return self.repos.setdefault(repo, _Repo())

    def add_issue(
        self,
        repo: str,
        title: str,
        body: str | None = "",
        *,
        labels: tuple[str, ...] | list[str] = (),
        milestone: str | None = None,
        state: str = "open",
        pull_request: bool = False,
        number: int | None = None,
    ) -> dict[str, Any]:
        """Add an issue (or, with `pull_request`, a pull request's issue item) and return it."""
        with self._lock:
            r = self.add_repo(repo)
            n = number if number is not None else r.next_number
            r.next_number = max(r.next_number, n + 1)
            issue: dict[str, Any] = {
                "number": n,
                "title": title,
                "body": body,
                "state": state,
                "labels": [{"name": name} for name in labels],
                "milestone": self._milestone(r, milestone) if milestone else None,
                "html_url": f"https://github.example/{repo}/issues/{n}",
                "updated_at": _now(),
            }
            if pull_request:
                issue["pull_request"] = {"url": f"https://github.example/{repo}/pull/{n}"}
            r.issues[n] = issue
            return issue

    def update_issue(self, repo: str, number: int, **changes: Any) -> None:
        """Change an issue's title, body, state or labels (a list of names), as an edit on GitHub."""
        with self._lock:
            issue = self.repos[repo].issues[number]
            if "labels" in changes:
                changes["labels"] = [{"name": name} for name in changes["labels"]]
            issue.update(changes, updated_at=_now())

    def set_pull_state(self, repo: str, number: int, state: str) -> None:
        """Make a pull request "open", "closed" or "merged" (GitHub: state closed, merged true)."""
        with self._lock:
            pr = self.repos[repo].pulls[number]
            pr["state"] = "open" if state == "open" else "closed"
            pr["merged"] = state == "merged"
            pr["merged_at"] = _now() if state == "merged" else None

    def delete_issue(self, repo: str, number: int, *, status: int = 410) -> None:
        """Take an issue away: GitHub answers 410 for a deleted issue, 404 for one the token can no
        longer see; either way it leaves the issue list."""
        with self._lock:
            self.repos[repo].issues.pop(number)
            self.repos[repo].gone[number] = status

    def lose_pull(self, repo: str, number: int) -> None:
        """Take a pull request away (its fork deleted, or the repository recreated): it answers 404."""
        with self._lock:
            self.repos[repo].pulls.pop(number)
            self.repos[repo].issues.pop(number, None)

    def set_pull_head(self, repo: str, number: int, sha: str) -> None:
        """The commit a pull request's branch points at now (GitHub reports it as `head.sha`)."""
        with self._lock:
            self.repos[repo].pulls[number]["head"]["sha"] = sha

    def add_check_run(
        self,
        repo: str,
        sha: str,
        name: str,
        conclusion: str,
        *,
        summary: str = "",
        text: str = "",
        log: str | None = None,
    ) -> dict[str, Any]:
        """A completed check run on a commit; with `log`, a GitHub Actions job whose log the API serves."""
        with self._lock:
            r = self.repos[repo]
            run_id = 1000 + sum(map(len, r.check_runs.values()))
            check = {
                "id": run_id,
                "name": name,
                "status": "completed",
                "conclusion": conclusion,
                "head_sha": sha,
                "html_url": f"https://github.example/{repo}/runs/{run_id}",
                "output": {"title": f"{name} {conclusion}", "summary": summary, "text": text},
                "app": {"slug": "github-actions" if log is not None else "other-ci"},
            }
            r.check_runs.setdefault(sha, []).append(check)
            if log is not None:
                r.job_logs[run_id] = log  # an Actions job: its check run names its workflow run and job
                check["details_url"] = f"https://github.example/{repo}/actions/runs/{run_id + 5000}/job/{run_id}"
            return check

    def add_status(self, repo: str, sha: str, context: str, state: str, description: str = "") -> None:
        """A commit status (the older CI API): `success`, `failure`, `error` or `pending`."""
        with self._lock:
            self.repos[repo].statuses.setdefault(sha, []).append(
                {
                    "id": 2000 + sum(map(len, self.repos[repo].statuses.values())),
                    "context": context,
                    "state": state,
                    "description": description,
                    "target_url": f"https://ci.example/{repo}/{context}",
                }
            )

    def add_review(
        self,
        repo: str,
        number: int,
        state: str,
        body: str = "",
        *,
        user: str = "reviewer",
        comments: tuple[tuple[str, int, str], ...] | list[tuple[str, int, str]] = (),
    ) -> dict[str, Any]:
        """A pull-request review (`CHANGES_REQUESTED`, `APPROVED`, `COMMENTED`) with inline comments
        as (path, line, text)."""
        with self._lock:
            r = self.repos[repo]
            review_id = 3000 + sum(map(len, r.reviews.values()))
            review = {"id": review_id, "state": state, "body": body, "user": {"login": user}, "submitted_at": _now()}
            r.reviews.setdefault(number, []).append(review)
            for path, line, text in comments:
                r.review_comments.setdefault(number, []).append(
                    {
                        "id": 4000 + sum(map(len, r.review_comments.values())),
                        "pull_request_review_id": review_id,
                        "path": path,
                        "line": line,
                        "body": text,
                        "user": {"login": user},
                    }
                )
            return review

    def gate(self, path: str, *, method: str = "GET", count: int = 2, timeout_s: float = 5.0) -> None:
        """Hold the answers to `method` requests of exactly `path` until `count` of them have come
        (or `timeout_s` passed for one): requests of several processes meet there, so a race
        between them happens every time rather than now and then."""
        with self._gate_moved:
            self._gates[(method, path)] = [count, timeout_s, 0]

    def _pass_gate(self, req: GitHubRequest) -> None:
        with self._gate_moved:
            gate = self._gates.get((req.method, req.path))
            if gate is None:
                return
            gate[2] += 1
            self._gate_moved.notify_all()
            self._gate_moved.wait_for(lambda: gate[2] >= gate[0], timeout=gate[1])

    def fail(self, status: int, *, path: str = "/", times: int | None = None) -> None:
        """Answer `status` (401, 404, 500, ...) to requests under `path`, `times` times (None: always)."""
        with self._lock:
            self._failures.append((status, path, times))

    def heal(self) -> None:
        with self._lock:
            self._failures.clear()
            self._limited = None

    def exhaust_rate_limit(self, reset_in: float, status: int = 403) -> None:
        """Use the rate limit up: requests get `status` with Remaining 0 until `reset_in` seconds pass."""
        with self._lock:
            self._limited = (status, int(time.time() + reset_in + 0.999))

    def requests_to(self, path: str, method: str | None = None) -> list[GitHubRequest]:
        return [r for r in self.requests if r.path == path and (method is None or r.method == method)]

    # --- the API ---------------------------------------------------------------------------

    @staticmethod
    def _milestone(r: _Repo, title: str) -> dict[str, Any]:
        for m in r.milestones.values():
            if m["title"] == title:
                return m
        number = len(r.milestones) + 1
        r.milestones[number] = {"number": number, "title": title, "state": "open"}
        return r.milestones[number]

    def handle(self, req: GitHubRequest, base: str) -> tuple[int, dict[str, str], Any]:
        """The status, extra headers and JSON body answering `req`."""
        with self._lock:
            for i, (status, prefix, times) in enumerate(self._failures):
                if req.path.startswith(prefix):
                    if times is not None:
                        self._failures[i] = (status, prefix, times - 1)
                        if times - 1 <= 0:
                            del self._failures[i]
                    return status, {}, {"message": _REASONS.get(status, "Server Error")}
            auth = req.headers.get("authorization", "")
            if auth not in (f"Bearer {self.token}", f"token {self.token}"):
                return 401, {}, {"message": "Bad credentials"}
            if self._limited is not None:
                status, reset = self._limited
                if time.time() < reset:
                    return (
                        status,
                        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)},
                        {"message": "API rate limit exceeded"},
                    )
                self._limited = None
            parts = req.path.strip("/").split("/")
            if len(parts) < 3 or parts[0] != "repos" or f"{parts[1]}/{parts[2]}" not in self.repos:
                return 404, {}, {"message": "Not Found"}
            repo = f"{parts[1]}/{parts[2]}"
            r = self.repos[repo]
            rest = parts[3:]
            return self._route(req, repo, r, rest, base)

    def _route(
        self, req: GitHubRequest, repo: str, r: _Repo, rest: list[str], base: str
    ) -> tuple[int, dict[str, str], Any]:
        m = req.method
        if not rest and m == "GET":
            return 200, {}, {"full_name": repo, "default_branch": "main"}
        if rest == ["issues"] and m == "GET":
            return self._issue_list(req, r, base)
        if rest == ["milestones"] and m == "GET":
            return 200, {}, list(r.milestones.values())
        if len(rest) == 2 and rest[0] == "issues" and rest[1].isdigit() and m == "GET":
            if int(rest[1]) in r.gone:
                status = r.gone[int(rest[1])]
                return status, {}, {"message": "This issue was deleted" if status == 410 else "Not Found"}
            issue = r.issues.get(int(rest[1]))
            return (200, {}, issue) if issue else (404, {}, {"message": "Not Found"})
        if len(rest) == 3 and rest[0] == "issues" and rest[2] == "comments":
            number = int(rest[1]) if rest[1].isdigit() else -1
            if number not in r.issues:
                return 404, {}, {"message": "Not Found"}
            if m == "POST":
                comment = {"id": sum(map(len, r.comments.values())) + 1, "body": (req.body or {}).get("body")}
                r.comments.setdefault(number, []).append(comment)
                return 201, {}, comment
            return 200, {}, r.comments.get(number, [])
        if rest == ["pulls"] and m == "POST":
            return self._create_pull(req, repo, r)
        if rest == ["pulls"] and m == "GET":
            head, state = req.query.get("head"), req.query.get("state", "open")
            found = [
                p
                for p in r.pulls.values()
                if (head is None or f"{repo.split('/')[0]}:{p['head']['ref']}" == head)
                and (state == "all" or p["state"] == state)
            ]
            return 200, {}, found
        if len(rest) == 2 and rest[0] == "pulls" and rest[1].isdigit() and m == "GET":
            pr = r.pulls.get(int(rest[1]))
            return (200, {}, pr) if pr else (404, {}, {"message": "Not Found"})
        if len(rest) == 2 and rest[0] == "pulls" and rest[1].isdigit() and m == "PATCH":
            return self._edit_pull(req, r, int(rest[1]))
        if len(rest) == 3 and rest[0] == "pulls" and rest[1].isdigit() and rest[2] in ("reviews", "comments"):
            if int(rest[1]) not in r.pulls:
                return 404, {}, {"message": "Not Found"}
            found = (r.reviews if rest[2] == "reviews" else r.review_comments).get(int(rest[1]), [])
            return 200, {}, found
        if len(rest) == 3 and rest[0] == "commits" and rest[2] == "check-runs" and m == "GET":
            runs = r.check_runs.get(rest[1], [])
            return 200, {}, {"total_count": len(runs), "check_runs": runs}
        if len(rest) == 3 and rest[0] == "commits" and rest[2] == "status" and m == "GET":
            statuses = r.statuses.get(rest[1], [])
            state = (
                "failure"
                if any(st["state"] in ("failure", "error") for st in statuses)
                else "pending"
                if any(st["state"] == "pending" for st in statuses) or not statuses
                else "success"
            )
            return 200, {}, {"state": state, "sha": rest[1], "total_count": len(statuses), "statuses": statuses}
        if len(rest) == 4 and rest[:2] == ["actions", "jobs"] and rest[3] == "logs" and rest[2].isdigit():
            log = r.job_logs.get(int(rest[2]))
            # GitHub redirects to the log's storage; this fake serves it there (text, not JSON).
            return (
                (302, {"Location": f"{base}/_logs/{repo}/{rest[2]}"}, None)
                if log is not None
                else (404, {}, {"message": "Not Found"})
            )
        return 404, {}, {"message": "Not Found"}

    def _issue_list(self, req: GitHubRequest, r: _Repo, base: str) -> tuple[int, dict[str, str], Any]:
        q = req.query
        state = q.get("state", "open")
        items = [i for i in r.issues.values() if state == "all" or i["state"] == state]
        if q.get("labels"):
            wanted = set(q["labels"].split(","))
            items = [i for i in items if wanted <= {lab["name"] for lab in i["labels"]}]
        if "milestone" in q:
            ms = q["milestone"]
            if ms == "none":
                items = [i for i in items if i["milestone"] is None]
            elif ms != "*":
                items = [i for i in items if i["milestone"] and str(i["milestone"]["number"]) == ms]
            else:
                items = [i for i in items if i["milestone"]]
        items.sort(key=lambda i: -i["number"])  # GitHub's default: newest first
        per_page = min(int(q.get("per_page", self.per_page)), self.max_per_page)
        page = int(q.get("page", "1"))
        chunk = items[(page - 1) * per_page : page * per_page]
        last = max(1, -(-len(items) // per_page))
        links = []
        for rel, p in (("next", page + 1), ("last", last)):
            if page < last:
                links.append(f'<{base}{req.path}?{urlencode({**q, "page": str(p)})}>; rel="{rel}"')
        return 200, ({"Link": ", ".join(links)} if links else {}), chunk

    def _edit_pull(self, req: GitHubRequest, r: _Repo, number: int) -> tuple[int, dict[str, str], Any]:
        """PATCH .../pulls/N: its title and body (a string each), as GitHub's "update a pull request"."""
        pr = r.pulls.get(number)
        if pr is None:
            return 404, {}, {"message": "Not Found"}
        body = req.body if isinstance(req.body, dict) else {}
        if any(k not in ("title", "body") or not isinstance(v, str) for k, v in body.items()):
            return 422, {}, {"message": "Validation Failed", "errors": [{"code": "invalid"}]}
        pr.update(body)
        r.issues[number].update(body)
        return 200, {}, pr

    def _create_pull(self, req: GitHubRequest, repo: str, r: _Repo) -> tuple[int, dict[str, str], Any]:
        body = req.body if isinstance(req.body, dict) else {}
        if not all(isinstance(body.get(k), str) for k in ("title", "head", "base")):
            return 422, {}, {"message": "Validation Failed", "errors": [{"code": "missing_field"}]}
        head = body["head"].split(":")[-1]
        if self.one_pull_per_branch and any(
            p["head"]["ref"] == head and p["state"] == "open" for p in r.pulls.values()
        ):
            return (
                422,
                {},
                {
                    "message": "Validation Failed",
                    "errors": [
                        {"code": "custom", "message": f"A pull request already exists for {repo.split('/')[0]}:{head}."}
                    ],
                },
            )
        n = r.next_number
        r.next_number += 1
        pr = {
            "number": n,
            "title": body["title"],
            "body": body.get("body"),
            "state": "open",
            "merged": False,
            "merged_at": None,
            "head": {"ref": head},
            "base": {"ref": body["base"]},
            "html_url": f"https://github.example/{repo}/pull/{n}",
        }
        r.pulls[n] = pr
        r.issues[n] = {
            "number": n,
            "title": body["title"],
            "body": body.get("body"),
            "state": "open",
            "labels": [],
            "milestone": None,
            "html_url": pr["html_url"],
            "updated_at": _now(),
            "pull_request": {"url": pr["html_url"]},
        }
        return 201, {}, pr


_REASONS = {
    401: "Bad credentials",
    403: "Forbidden",
    404: "Not Found",
    500: "Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class _Handler(BaseHTTPRequestHandler):
    github: FakeGitHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _serve(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        req = GitHubRequest(
            self.command,
            split.path,
            dict(parse_qsl(split.query)),
            {k.lower(): v for k, v in self.headers.items()},
            body,
        )
        fake = self.github
        with fake._lock:
            fake.requests.append(req)
        if split.path.startswith("/_logs/"):  # an Actions job log, outside the API (no token)
            self._serve_log(split.path)
            return
        fake._pass_gate(req)
        status, headers, payload = fake.handle(req, fake.url)
        data = json.dumps(payload).encode() if payload is not None else b""
        with fake._lock:
            if status == 200 and self.command == "GET":
                etag = '"' + hashlib.sha1(data).hexdigest() + '"'
                headers["ETag"] = etag
                if req.headers.get("if-none-match") == etag:
                    status, data = 304, b""  # a conditional hit is free on GitHub
            if status not in (304,) and "X-RateLimit-Remaining" not in headers:
                fake.remaining = max(0, fake.remaining - 1)
            headers.setdefault("X-RateLimit-Limit", str(fake.rate_limit))
            headers.setdefault("X-RateLimit-Remaining", str(fake.remaining))
            headers.setdefault("X-RateLimit-Reset", str(fake.reset_at))
            req.status = status
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if data:
            self.wfile.write(data)

    def _serve_log(self, path: str) -> None:
        parts = path.strip("/").split("/")  # _logs/OWNER/REPO/JOB
        fake = self.github
        with fake._lock:
            repo = fake.repos.get(f"{parts[1]}/{parts[2]}") if len(parts) == 4 else None
            log = repo.job_logs.get(int(parts[3])) if repo and parts[3].isdigit() else None
        data = (log or "").encode()
        self.send_response(200 if log is not None else 404)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve
