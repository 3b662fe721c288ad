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
    said = " ".join(result.output.split())
    assert f"pull request {PR} of gh-1 asks for changes (3 thing(s), from CI `tests`, CI `lint`, review by alice)" \
        in said
    assert "complete ticket gh-1" in result.output
    with store(project) as s:
        runs = s.list_runs("gh-1")
        assert [s.round_of(r["id"]) for r in runs] == [1, 2]
        opening = s.feedback(runs[1]["id"])[0]
        feedback = opening["text"]
        assert runs[1]["pr_url"] == PR  # the round keeps the ticket's pull request
    # The round is labelled by what started it, not as a person's feedback.
    by = "pull request #2: CI `tests`, CI `lint`, review by alice"
    assert (opening["by"], opening["label"]) == (by, f"feedback from {by}")
    log = " ".join(invoke("log", "gh-1").output.split())
    assert f"round 2 — feedback from {by}: The pull request needs changes" in log
    assert "the human's feedback" not in log
    from orchestrator.cli.log_view import describe_event  # the events' line, as the live log shows it

    with store(project) as s:
        event = next(e for e in s.list_events(run_id=runs[1]["id"], limit=1000) if e["kind"] == "feedback")
    assert describe_event(event).startswith(f"round 2: feedback from {by}: The pull request needs changes")
    assert "CI check `tests` failure" in feedback and "FAILED test_calc.py::test_empty" in feedback
    assert "CI status `lint` failure on the pull request: ruff found 2 problems" in feedback
    assert "Review by alice requests changes" in feedback and "- calc.py:2: name the empty case" in feedback
    assert "fine by me" not in feedback
    # The round's commit is on the pull request's branch.
    new_head = out(project / "repo", "rev-parse", "middle/gh-1")
    assert new_head != head and out(project / "remote.git", "rev-parse", "middle/gh-1") == new_head
    assert out(project / "remote.git", "show", "middle/gh-1:extra.py") == "VALUE = 1"
    body = github.repos["me/app"].pulls[2]["body"]  # rewritten: the round and who asked for it
    assert f"Review rounds:\n- round 2: feedback from {by}" in body and "`extra.py`" in body
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


def test_an_automatic_round_that_fails_leaves_the_pull_request_followed(project, github, claude_cli):
    """A round a review started fails (its check fails, no corrections allowed): the ticket is
    failed, and the pull request is still read: the next review starts a round on it, and the one
    after that waits for a person ([github] auto_rounds = 2); a merge on GitHub is still seen."""
    toml = project / "middle.toml"
    toml.write_text(toml.read_text().replace("[github]\n", "[github]\nauto_rounds = 2\n")
                    + '[check]\ncommands = ["test ! -e broken.py"]\nmax_rounds = 0\n')
    github.add_review("me/app", 2, "CHANGES_REQUESTED", _create("broken.py", 1), user="alice")
    failed = invoke("sync", "--from", "github:me/app", "--fake")
    assert failed.exit_code == 1 and "failed ticket gh-1" in failed.output, failed.output
    with store(project) as s:
        assert s.get_ticket("gh-1").status.value == "failed"
        assert (s.latest_run("gh-1")["pr_url"], s.latest_run("gh-1")["pr_state"]) == (PR, "open")
    quiet = invoke("sync", "--from", "github:me/app", "--fake")  # nothing new on the pull request: no round
    assert quiet.exit_code == 0 and "asks for changes" not in quiet.output, quiet.output
    github.add_review("me/app", 2, "CHANGES_REQUESTED", "Please also add this.\n" + _create("two.py", 2), user="bob")
    second = invoke("sync", "--from", "github:me/app", "--fake")
    said = " ".join(second.output.split())
    assert f"pull request {PR} of gh-1 asks for changes (1 thing(s), from review by bob)" in said, second.output
    with store(project) as s:
        runs = s.list_runs("gh-1")
        assert [s.round_of(r["id"]) for r in runs] == [1, 2, 3]
        assert s.feedback(runs[2]["id"])[0]["by"] == "pull request #2: review by bob"
    github.add_review("me/app", 2, "CHANGES_REQUESTED", _create("three.py", 3), user="carol")
    capped = invoke("sync", "--from", "github:me/app", "--fake")
    assert "waiting for a person" in capped.output, capped.output
    with store(project) as s:
        assert len(s.list_runs("gh-1")) == 3
    github.set_pull_state("me/app", 2, "merged")
    merged = invoke("sync", "--from", "github:me/app", "--fake")
    assert f"merged gh-1: pull request {PR} was merged on GitHub" in " ".join(merged.output.split()), merged.output


def test_an_actions_job_log_is_downloaded_once_per_run_and_job(project, github):
    """Reading the pull request's signals again (a sync whose round did not start, another
    process's sync) reuses the kept tail of a failed Actions job's log; the kept file is
    untrusted: a corrupt one is ignored and the log downloaded again."""
    from orchestrator.config.settings import load_config
    from orchestrator.github.signals import read_signals

    head = out(project / "repo", "rev-parse", "middle/gh-1")
    check = github.add_check_run("me/app", head, "tests", "failure", log="collected 4 items\nFAILED test_x - boom\n")
    log_path = f"/repos/me/app/actions/jobs/{check['id']}/logs"
    config = load_config(project / "middle.toml")
    with store(project) as s:
        for _ in range(2):
            [found] = read_signals(s, config)
            assert "FAILED test_x - boom" in found.feedback and found.by == "pull request #2: CI `tests`"
        assert len(github.requests_to(log_path)) == 1  # once, not on every read
        kept = project / ".middle" / "github" / "me__app.job-logs.json"
        assert "FAILED test_x - boom" in kept.read_text()
        kept.write_text('{"version": 1, "api": "' + github.url + '", "entries": {"' + f"{check['id'] + 5000}/"
                        + f"{check['id']}" + '": 7}}')  # an entry of the wrong shape: ignored, fetched again
        [found] = read_signals(s, config)
        assert "FAILED test_x - boom" in found.feedback and len(github.requests_to(log_path)) == 2
        kept.write_text("not json")
        [found] = read_signals(s, config)
        assert "FAILED test_x - boom" in found.feedback and len(github.requests_to(log_path)) == 3
        [found] = read_signals(s, config)
        assert len(github.requests_to(log_path)) == 3  # kept again after the bad file


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
