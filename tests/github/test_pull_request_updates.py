"""A ticket's open pull request follows the ticket: `middle feedback` on it runs a round whose
commits are pushed to the pull request's branch (the project's `origin`, a real bare repository)
and whose description is rewritten on the fake GitHub; when that push fails, the ticket stays
complete, the line says so, and `middle pr` later pushes and rewrites instead of saying nothing; a
commit someone else pushed to the pull request's branch is never overwritten."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from pr_helpers import complete_pr_ticket

from orchestrator.cli.main import main
from orchestrator.testing import make_repo
from orchestrator.testing.git import commit_all
from orchestrator.workspace.git import git, out
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

PR = "https://github.example/me/app/pull/2"


def invoke(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def store(root: Path) -> TicketStore:
    return TicketStore(root / ".middle" / "middle.sqlite3")


@pytest.fixture
def project(tmp_path, monkeypatch, github):
    """gh-1 complete on middle/gh-1, pushed to `origin` (no [project] repo_url: nothing but the
    pull request's owner pushes), its pull request #2 open on the fake GitHub."""
    monkeypatch.chdir(tmp_path)
    for var in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    repo = make_repo(tmp_path / "repo")
    git(tmp_path, "init", "--quiet", "--bare", str(tmp_path / "remote.git"))
    git(repo, "remote", "add", "origin", str(tmp_path / "remote.git"))
    (tmp_path / "middle.toml").write_text(
        '[project]\npath = "repo"\nid = "app"\nbase_branch = "main"\n'
        f'[github]\napi_url = "{github.url}"\nrepo = "me/app"\n[memory]\nbackend = "none"\n'
        '[coding_agent.options]\nallowed_tools = ["Read", "Write", "Edit"]\nturn_timeout_s = 120\n')
    complete_pr_ticket(tmp_path, repo, github)
    return tmp_path


def _create(path: str, value: int) -> str:
    return f"Create `{path}` with:\n```python\nVALUE = {value}\n```\n"


def _remote_head(project: Path) -> str:
    return out(project / "remote.git", "rev-parse", "middle/gh-1")


def test_feedback_on_a_ticket_with_an_open_pull_request_pushes_its_commits_and_rewrites_the_body(
        project, github, claude_cli):
    before = _remote_head(project)
    result = invoke("feedback", "gh-1", _create("extra.py", 1), "--fake")
    assert result.exit_code == 0, result.output
    head = out(project / "repo", "rev-parse", "middle/gh-1")
    assert head != before and _remote_head(project) == head  # the round's commit is on the PR's branch
    assert out(project / "remote.git", "show", "middle/gh-1:extra.py") == "VALUE = 1"
    said = " ".join(result.output.split())
    assert f"updated pull request {PR} of gh-1: pushed middle/gh-1 ({head[:10]}) and rewrote its description" in said
    body = github.repos["me/app"].pulls[2]["body"]
    assert "`extra.py`" in body and "Closes #1" in body  # the description is the ticket's now
    assert "Review rounds:\n- round 2: the human's feedback" in body
    assert [r.body for r in github.requests_to("/repos/me/app/pulls/2", "PATCH")] == [{"body": body}]
    with store(project) as s:
        assert (s.get_ticket("gh-1").status.value, s.latest_run("gh-1")["pr_url"]) == ("complete", PR)
    # Nothing left to bring: `middle pr` says so, pushes nothing, edits nothing.
    again = invoke("pr", "gh-1")
    assert again.exit_code == 0 and f"already has its pull request: {PR} (up to date)" in again.output
    assert len(github.requests_to("/repos/me/app/pulls/2", "PATCH")) == 1


def test_a_round_whose_push_fails_is_pushed_by_the_next_middle_pr(project, github, claude_cli):
    before = _remote_head(project)
    refuse = project / "remote.git" / "hooks" / "pre-receive"
    refuse.write_text("#!/bin/sh\necho 'pushes are closed for maintenance' >&2\nexit 1\n")
    refuse.chmod(0o755)
    result = invoke("feedback", "gh-1", _create("extra.py", 2), "--fake")
    assert result.exit_code == 0, result.output  # the round completed; its pull request is behind
    said = " ".join(result.output.split())
    assert f"pull request {PR} of gh-1 not updated: could not push middle/gh-1" in said
    assert "(the next `middle sync` tries again, or `middle pr gh-1`)" in said
    assert _remote_head(project) == before and not github.requests_to("/repos/me/app/pulls/2", "PATCH")
    refuse.unlink()
    later = invoke("pr", "gh-1")
    assert later.exit_code == 0, later.output
    head = out(project / "repo", "rev-parse", "middle/gh-1")
    assert _remote_head(project) == head != before
    assert f"updated pull request {PR} of gh-1: pushed middle/gh-1 ({head[:10]})" in " ".join(later.output.split())
    assert "`extra.py`" in github.repos["me/app"].pulls[2]["body"]
    assert len(github.requests_to("/repos/me/app/pulls", "POST")) == 1  # never a second pull request


def test_a_commit_someone_pushed_to_the_pull_request_is_never_overwritten(project, github, claude_cli):
    other = project / "other"
    git(project, "clone", "--quiet", "--branch", "middle/gh-1", str(project / "remote.git"), str(other))
    (other / "theirs.txt").write_text("a reviewer's fix\n")
    theirs = commit_all(other, "A reviewer's fix")
    git(other, "push", "--quiet", "origin", "middle/gh-1")
    result = invoke("feedback", "gh-1", _create("extra.py", 3), "--fake")
    assert result.exit_code == 0, result.output  # the round completed; its pull request is left alone
    said = " ".join(result.output.split())
    assert f"pull request {PR} of gh-1 not updated: the branch middle/gh-1 of pull request {PR} has commits " \
           f"ticket gh-1 does not ({theirs[:10]}" in said
    assert _remote_head(project) == theirs and not github.requests_to("/repos/me/app/pulls/2", "PATCH")
    again = invoke("pr", "gh-1")
    assert again.exit_code == 1 and again.output.startswith("error: ") and "are not overwritten" in again.output
    assert _remote_head(project) == theirs
