"""`middle pr ID`: push a complete ticket's branch to a local bare repository and open its pull
request on the fake GitHub, once; `middle sync` reads merged/closed pull requests back."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from pr_helpers import complete_pr_ticket

from orchestrator.cli.main import main
from orchestrator.testing import make_repo
from orchestrator.workspace.git import git, out
from tickets.model import TicketStatus
from tickets.store import TicketStore


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def write_config(root: Path, api_url: str, repo_url: str | None, extra: str = "") -> None:
    remote = f'repo_url = "{repo_url}"\n' if repo_url else ""
    (root / "middle.toml").write_text(f'[project]\npath = "repo"\nid = "app"\nbase_branch = "main"\n{remote}'
                                      f'[github]\napi_url = "{api_url}"\n{extra}')


@pytest.fixture
def project(tmp_path, monkeypatch, github):
    """A project with a bare remote, and a complete ticket gh-1 (issue #1 of me/app) on branch middle/gh-1."""
    monkeypatch.chdir(tmp_path)
    for var in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    repo = make_repo(tmp_path / "repo")
    git(tmp_path, "init", "--quiet", "--bare", str(tmp_path / "remote.git"))
    write_config(tmp_path, github.url, str(tmp_path / "remote.git"))
    complete_pr_ticket(tmp_path, repo, github, open_pr=False, worktree=None, total_cost_usd=0.42)
    return tmp_path


def pr_of(root: Path) -> tuple[str | None, str | None]:
    with TicketStore(root / ".middle" / "middle.sqlite3") as store:
        run = store.latest_run("gh-1")
        assert run is not None
        return run["pr_url"], run["pr_state"]


def remote_branch(root: Path) -> str | None:
    found = git(root / "remote.git", "rev-parse", "--verify", "--quiet", "refs/heads/middle/gh-1", check=False)
    return found.stdout.strip() or None


def test_middle_pr_pushes_the_branch_and_opens_the_pull_request_once(project, github):
    result = invoke("pr", "gh-1")
    assert result.exit_code == 0, result.output
    assert "opened pull request https://github.example/me/app/pull/2 for gh-1" in result.output
    assert remote_branch(project) == out(project / "repo", "rev-parse", "middle/gh-1")
    sent = github.requests_to("/repos/me/app/pulls", "POST")
    assert len(sent) == 1
    body = sent[0].body
    assert body["title"] == "Handle empty input" and body["head"] == "middle/gh-1" and body["base"] == "main"
    assert "calc() returns 0 for empty input." in body["body"] and "`calc.py` (+2 -0)" in body["body"]
    assert "Turns: 0" in body["body"] and "Closes #1" in body["body"]
    assert pr_of(project) == ("https://github.example/me/app/pull/2", "open")
    again = invoke("pr", "gh-1")
    assert again.exit_code == 0 and len(github.requests_to("/repos/me/app/pulls", "POST")) == 1
    assert "gh-1 already has its pull request: https://github.example/me/app/pull/2" in again.output
    log = invoke("log", "gh-1")
    assert "pull request https://github.example/me/app/pull/2 (open)" in log.output, log.output
    assert "from https://github.example/me/app/issues/1" in log.output


def test_a_pull_request_call_failing_after_the_push_is_finished_by_the_next_middle_pr(project, github):
    github.fail(502, path="/repos/me/app/pulls")  # after the push: every try of the lookup fails
    first = invoke("pr", "gh-1")
    assert first.exit_code == 1 and "\nerror: GitHub answered 502" in first.output, first.output
    assert first.output.count("note: GitHub did not answer GET") == 2  # three tries, then the error
    assert remote_branch(project) is not None and pr_of(project) == (None, "opening")  # pushed: intent recorded
    github.heal()
    second = invoke("pr", "gh-1")
    assert second.exit_code == 0, second.output
    assert pr_of(project)[1] == "open" and len(github.repos["me/app"].pulls) == 1


def test_a_pull_request_opened_before_a_crash_is_found_not_opened_again(project, github):
    github.add_repo("me/app")
    with TicketStore(project / ".middle" / "middle.sqlite3") as store:
        store.set_run_fields(store.latest_run("gh-1")["id"], pr_state="opening")
    import httpx

    httpx.post(f"{github.url}/repos/me/app/pulls", headers={"Authorization": f"Bearer {github.token}"},
               json={"title": "Handle empty input", "head": "middle/gh-1", "base": "main"})  # then the crash
    result = invoke("pr", "gh-1")
    assert result.exit_code == 0 and "found pull request" in result.output, result.output
    assert len(github.repos["me/app"].pulls) == 1 and pr_of(project)[1] == "open"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("case, needle", [
    ("pending", "error: ticket 'gh-1' is pending, not complete"),
    ("no token", "error: no GitHub token: set GITHUB_TOKEN"),
    ("401", "error: GitHub refused the token in GITHUB_TOKEN (401"),
    ("404", "error: GitHub has no repository me/app"),
    ("closed port", "error: cannot reach GitHub at http://127.0.0.1:"),
    ("no remote", "error: no remote to push the ticket's branch to"),
    ("bad repo", "error: bad GitHub repository 'not a repo'"),
])
def test_each_mistake_is_one_error_line_and_nothing_is_pushed(project, github, monkeypatch, case, needle):
    if case == "pending":
        with TicketStore(project / ".middle" / "middle.sqlite3") as store:
            store.set_status("gh-1", TicketStatus.PENDING)
    elif case == "no token":
        monkeypatch.delenv("GITHUB_TOKEN")
    elif case == "401":
        monkeypatch.setenv("GITHUB_TOKEN", "expired")
    elif case == "404":
        github.repos.pop("me/app")
    elif case == "closed port":
        write_config(project, f"http://127.0.0.1:{_closed_port()}", str(project / "remote.git"))
    elif case == "no remote":
        write_config(project, github.url, None)
    elif case == "bad repo":
        write_config(project, github.url, str(project / "remote.git"), 'repo = "not a repo"\n')
    result = invoke("pr", "gh-1")
    assert result.exit_code == 1 and "Traceback" not in result.output
    said = [ln for ln in result.output.splitlines() if ln.strip() and not ln.startswith("note: GitHub did not answer")]
    assert len(said) == 1 and said[0].startswith(needle), result.output  # retries are said, then one error
    assert remote_branch(project) is None and pr_of(project) == (None, None)
    assert github.requests_to("/repos/me/app/pulls", "POST") == []


@pytest.mark.parametrize("state, status", [("merged", TicketStatus.MERGED), ("closed", TicketStatus.DISCARDED)])
def test_sync_reads_the_pull_request_state_back(project, github, state, status):
    assert invoke("pr", "gh-1").exit_code == 0
    github.set_pull_state("me/app", 2, state)
    result = invoke("sync", "--from", "github:me/app")
    assert result.exit_code == 0, result.output
    assert f"{status.value} gh-1: pull request https://github.example/me/app/pull/2" in result.output
    with TicketStore(project / ".middle" / "middle.sqlite3") as store:
        assert store.get_ticket("gh-1").status is status
        assert store.latest_run("gh-1")["pr_state"] == state


def test_a_pull_request_creation_that_meets_a_5xx_is_not_sent_twice(project, github):
    original, posts = github.handle, []

    def creation_fails(req, base):  # the lookup answers; the first creation meets a 5xx
        if req.method == "POST" and req.path == "/repos/me/app/pulls":
            posts.append(req)
            if len(posts) == 1:
                return 502, {}, {"message": "Bad Gateway"}
        return original(req, base)

    github.handle = creation_fails
    first = invoke("pr", "gh-1")
    assert first.exit_code == 1 and first.output.startswith("error: GitHub answered 502"), first.output
    assert len(posts) == 1  # a POST is never sent again by the client
    second = invoke("pr", "gh-1")
    assert second.exit_code == 0, second.output
    assert len(github.repos["me/app"].pulls) == 1


def test_a_pull_request_gone_from_github_is_forgotten_once_and_middle_pr_opens_a_new_one(project, github):
    assert invoke("pr", "gh-1").exit_code == 0
    github.lose_pull("me/app", 2)
    result = invoke("sync", "--from", "github:me/app")
    assert result.exit_code == 0, result.output
    assert "pull request https://github.example/me/app/pull/2 of gh-1 is gone from GitHub" in result.output
    assert pr_of(project) == (None, "gone")
    with TicketStore(project / ".middle" / "middle.sqlite3") as store:
        assert store.get_ticket("gh-1").status is TicketStatus.COMPLETE
    again = invoke("sync", "--from", "github:me/app")
    assert again.exit_code == 0 and "is gone from GitHub" not in again.output, again.output  # said once
    assert "pull request gone from GitHub" in invoke("log", "gh-1").output
    reopened = invoke("pr", "gh-1")
    assert reopened.exit_code == 0 and "opened pull request https://github.example/me/app/pull/3" in reopened.output


def test_two_middle_pr_processes_at_once_open_one_pull_request(project, github):
    """Two `middle pr` processes of one ticket, against an API that does not refuse a second pull
    request of the branch: the second waits for the first's claim and finds its pull request."""
    import os
    import subprocess
    import sys

    github.one_pull_per_branch = False
    github.gate("/repos/me/app/pulls", count=2)  # lookups of both processes meet here, if both get there
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-m", "orchestrator.cli.main", "pr", "gh-1"], cwd=project, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert len(github.requests_to("/repos/me/app/pulls", "POST")) == 1, outputs
    assert list(github.repos["me/app"].pulls) == [2]
    said = "\n".join(outputs)
    assert "opened pull request https://github.example/me/app/pull/2" in said
    assert "gh-1 already has its pull request: https://github.example/me/app/pull/2" in said
    assert pr_of(project) == ("https://github.example/me/app/pull/2", "open")
    with TicketStore(project / ".middle" / "middle.sqlite3") as store:
        assert store.get_claim("gh-1") is None  # the hold was given back
