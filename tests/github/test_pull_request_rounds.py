"""A pull request whose CI fails or whose reviewer requests changes gets a review round without
anyone copying text: `middle sync` reads the failed check runs (with an Actions job's log tail),
commit statuses and changes-requested reviews (with their inline comments) on the fake GitHub,
starts one round with them as the feedback, pushes its commits to the pull request, acts on each
once, and stops starting rounds by itself after `[github] auto_rounds`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.testing import make_repo
from orchestrator.testing.git import commit_all
from orchestrator.workspace.git import git, out
from tickets.model import Ticket
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

PR = "https://github.example/me/app/pull/2"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def store(root: Path) -> TicketStore:
    return TicketStore(root / ".middle" / "middle.sqlite3")


@pytest.fixture
def project(tmp_path, monkeypatch, github):
    """gh-1 complete on middle/gh-1 (in its worktree), its pull request #2 open on the fake GitHub."""
    monkeypatch.chdir(tmp_path)
    for var in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    repo = make_repo(tmp_path / "repo")
    git(tmp_path, "init", "--quiet", "--bare", str(tmp_path / "remote.git"))
    (tmp_path / "middle.toml").write_text(
        f'[project]\npath = "repo"\nid = "app"\nbase_branch = "main"\nrepo_url = "{tmp_path / "remote.git"}"\n'
        f'[github]\napi_url = "{github.url}"\n[memory]\nbackend = "none"\n'
        '[coding_agent.options]\nallowed_tools = ["Read", "Write", "Edit"]\nturn_timeout_s = 120\n')
    github.add_issue("me/app", "Handle empty input", "calc() crashes on ''")
    base = out(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "--quiet", "-b", "middle/gh-1")
    (repo / "calc.py").write_text("def calc(s):\n    return s or 0\n")
    head = commit_all(repo, "Handle empty input")
    git(repo, "checkout", "--quiet", "main")
    with store(tmp_path) as s:
        s.upsert_ticket(Ticket(id="gh-1", project_id="app", title="Handle empty input", project_path=str(repo),
                               source="https://github.example/me/app/issues/1",
                               fields={"github": {"repo": "me/app", "number": 1}, "labels": []}))
        run_id = s.claim_new_run("gh-1", ("pending",))
        assert run_id is not None
        s.set_run_fields(run_id, repo=str(repo), branch="middle/gh-1", base_branch="main", base_commit=base,
                         head_commit=head, changes=[{"path": "calc.py", "added": 2, "deleted": 0}],
                         isolation="worktree", worktree=str(tmp_path / ".middle" / "worktrees" / "gh-1"))
        s.end_run("gh-1", run_id, "complete", None, ticket_reason="calc() returns 0 for empty input.")
    assert invoke("pr", "gh-1").exit_code == 0
    return tmp_path


def _create(path: str, value: int) -> str:
    return f"Create `{path}` with:\n```python\nVALUE = {value}\n```\n"


def test_failed_ci_and_a_review_start_one_round_each_signal_once(project, github, claude_cli):
    head = out(project / "repo", "rev-parse", "middle/gh-1")
    github.add_check_run("me/app", head, "tests", "failure", summary="1 failed, 3 passed",
                         log="collected 4 items\nFAILED test_calc.py::test_empty - TypeError\n")
    github.add_status("me/app", head, "lint", "failure", "ruff found 2 problems")
    github.add_review("me/app", 2, "CHANGES_REQUESTED", "Please add the module below.\n" + _create("extra.py", 1),
                      user="alice", comments=[("calc.py", 2, "name the empty case")])
    github.add_review("me/app", 2, "APPROVED", "fine by me", user="bob")  # not a request: no round
    result = invoke("sync", "--from", "github:me/app", "--fake")
    assert result.exit_code == 0, result.output
    assert f"pull request {PR} of gh-1 asks for changes (3 thing(s))" in result.output
    assert "complete ticket gh-1" in result.output
    with store(project) as s:
        runs = s.list_runs("gh-1")
        assert [s.round_of(r["id"]) for r in runs] == [1, 2]
        feedback = s.feedback(runs[1]["id"])[0]["text"]
        assert runs[1]["pr_url"] == PR  # the round keeps the ticket's pull request
    assert "CI check `tests` failure" in feedback and "FAILED test_calc.py::test_empty" in feedback
    assert "CI status `lint` failure on the pull request: ruff found 2 problems" in feedback
    assert "Review by alice requests changes" in feedback and "- calc.py:2: name the empty case" in feedback
    assert "fine by me" not in feedback
    # The round's commit is on the pull request's branch.
    new_head = out(project / "repo", "rev-parse", "middle/gh-1")
    assert new_head != head and out(project / "remote.git", "rev-parse", "middle/gh-1") == new_head
    assert out(project / "remote.git", "show", "middle/gh-1:extra.py") == "VALUE = 1"
    # Each signal once: the next sync starts nothing.
    again = invoke("sync", "--from", "github:me/app", "--fake")
    assert again.exit_code == 0 and "asks for changes" not in again.output
    with store(project) as s:
        assert len(s.list_runs("gh-1")) == 2


def test_a_pull_request_starts_at_most_auto_rounds_rounds_by_itself(project, github, claude_cli):
    toml = project / "middle.toml"
    toml.write_text(toml.read_text().replace("[github]\n", "[github]\nauto_rounds = 1\n"))
    github.add_review("me/app", 2, "CHANGES_REQUESTED", _create("one.py", 1), user="alice")
    first = invoke("sync", "--from", "github:me/app", "--fake")
    assert first.exit_code == 0 and "complete ticket gh-1" in first.output, first.output
    github.add_review("me/app", 2, "CHANGES_REQUESTED", _create("two.py", 2), user="alice")
    capped = invoke("sync", "--from", "github:me/app", "--fake")
    assert capped.exit_code == 0, capped.output
    assert "waiting for a person" in capped.output and "middle feedback gh-1" in capped.output
    with store(project) as s:
        assert len(s.list_runs("gh-1")) == 2
    quiet = invoke("sync", "--from", "github:me/app", "--fake")  # said once
    assert "waiting for a person" not in quiet.output


def _signals(root: Path):
    from orchestrator.config.settings import load_config
    from orchestrator.github.signals import read_signals

    with store(root) as s:
        return read_signals(s, load_config(root / "middle.toml", environ={}))


def test_a_pull_request_whose_head_is_a_string_is_read_as_one_without_a_head(project, github):
    """A malformed answer (`"head": "middle/gh-1"`) once gave a traceback: the run's own head is used."""
    head = out(project / "repo", "rev-parse", "middle/gh-1")
    github.add_check_run("me/app", head, "tests", "failure", summary="1 failed, 3 passed")
    github.repos["me/app"].pulls[2]["head"] = "middle/gh-1"
    found = _signals(project)
    assert len(found) == 1 and "CI check `tests` failure" in found[0].feedback


def test_a_404_on_a_pull_requests_reviews_names_them_not_the_repository(project, github):
    from orchestrator.errors import TicketError

    github.fail(404, path="/repos/me/app/pulls/2/reviews")
    with pytest.raises(TicketError) as refused:
        _signals(project)
    assert str(refused.value).startswith("GitHub found nothing for the reviews of pull request #2 in me/app "
                                         "(404): the pull request, issue or commit it names may be gone")
    assert "has no repository" not in str(refused.value)
