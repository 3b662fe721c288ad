"""kill -9 of a run just after its end was stored, before its end hooks did what it asked of its
pull request (orchestrator.killpoints: run.hooks), with the fake GitHub, the real Claude Code CLI
on the fake Messages API and a real SQLite store. The end records what is due (runs.pr_due, in
its transaction); the next `middle sync` does it once, from the store alone:

- a review round of a ticket whose pull request is open, with `[project] repo_url` set (the round
  pushed its branch there itself, so only the description is behind): the description is
  rewritten;
- `[run] on_complete = "pr"`: the pull request is opened, once; a ticket that completed before
  `on_complete` was set gets none.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pr_helpers import complete_pr_ticket

from orchestrator.cli.main import main
from orchestrator.killpoints import VARIABLE
from orchestrator.testing import make_repo
from orchestrator.workspace.git import git, out
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

PR = "https://github.example/me/app/pull/2"
TOOLS = '[coding_agent.options]\nallowed_tools = ["Read", "Write", "Edit"]\nturn_timeout_s = 120\n'


def invoke(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, github, run: str = "") -> Path:
    monkeypatch.chdir(tmp_path)
    for var in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    repo = make_repo(tmp_path / "repo")
    git(tmp_path, "init", "--quiet", "--bare", str(tmp_path / "remote.git"))
    (tmp_path / "middle.toml").write_text(
        f'[project]\npath = "repo"\nid = "app"\nbase_branch = "main"\nrepo_url = "{tmp_path / "remote.git"}"\n'
        f'[github]\napi_url = "{github.url}"\nrepo = "me/app"\n[memory]\nbackend = "none"\n{run}{TOOLS}')
    return repo


def _killed(*args: str, at: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", *args, "--fake"], cwd=cwd, capture_output=True,
                          text=True, timeout=180, env={**os.environ, VARIABLE: at})
    assert proc.returncode == -9, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def _pr_due(root: Path) -> str | None:
    with TicketStore(root / ".middle" / "middle.sqlite3") as s:
        run = s.latest_run("gh-1")
        assert run is not None
        return run["pr_due"]


def test_a_round_killed_before_its_hooks_with_repo_url_has_its_description_rewritten_by_the_next_sync(
        tmp_path, monkeypatch, github, claude_cli):
    """Before, the next sync compared the remote's branch with the round's commit only (to spare a
    GitHub call per pull request): with `[project] repo_url` the round had pushed the branch there
    itself, so the sync found nothing behind and the description stayed the earlier round's until
    a person's `middle pr`."""
    repo = _setup(tmp_path, monkeypatch, github)
    complete_pr_ticket(tmp_path, repo, github)
    _killed("feedback", "gh-1", "Create `extra.py` with:\n```python\nVALUE = 1\n```\n", at="run.hooks:1",
            cwd=tmp_path)
    head = out(repo, "rev-parse", "middle/gh-1")
    assert out(tmp_path / "remote.git", "rev-parse", "middle/gh-1") == head  # the round pushed it itself
    assert "`extra.py`" not in github.repos["me/app"].pulls[2]["body"]  # its description is behind
    assert _pr_due(tmp_path) == "update"
    result = invoke("sync", "--from", "github:me/app", "--fake")
    assert result.exit_code == 0, result.output
    assert f"updated pull request {PR} of gh-1: rewrote its description" in " ".join(result.output.split())
    assert "`extra.py`" in github.repos["me/app"].pulls[2]["body"]
    assert _pr_due(tmp_path) is None
    again = invoke("sync", "--from", "github:me/app", "--fake")  # done: nothing more
    assert again.exit_code == 0 and "updated pull request" not in again.output, again.output
    assert len(github.requests_to("/repos/me/app/pulls/2", "PATCH")) == 1


TICKET = "---\ntitle: Add a value\nid: t1\n---\nCreate `value.py` with:\n```python\nVALUE = 7\n```\n"


def test_a_run_killed_before_on_complete_opened_its_pull_request_has_it_opened_once_by_the_next_sync(
        tmp_path, monkeypatch, github, claude_cli):
    """Before, only `middle pr ID` opened it: a sync could not tell the ticket from one that
    completed before `on_complete` was set. Now the run's end records the intent (pr_due)."""
    _setup(tmp_path, monkeypatch, github, run='[run]\non_complete = "pr"\n')
    github.add_repo("me/app")
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "t1.md").write_text(TICKET)
    _killed("run", "t1", "--tickets", "tickets", at="run.hooks:1", cwd=tmp_path)
    with TicketStore(tmp_path / ".middle" / "middle.sqlite3") as s:
        run = s.latest_run("t1")
        assert run is not None and s.get_ticket("t1").status.value == "complete"
        assert (run["pr_due"], run["pr_url"]) == ("open", None)
    assert not github.requests_to("/repos/me/app/pulls", "POST")
    result = invoke("sync", "--tickets", "tickets", "--fake")
    assert result.exit_code == 0, result.output
    assert "opened pull request https://github.example/me/app/pull/" in result.output
    again = invoke("sync", "--tickets", "tickets", "--fake")
    assert again.exit_code == 0 and "pull request" not in again.output, again.output
    assert len(github.requests_to("/repos/me/app/pulls", "POST")) == 1
    with TicketStore(tmp_path / ".middle" / "middle.sqlite3") as s:
        run = s.latest_run("t1")
        assert run is not None and run["pr_state"] == "open" and run["pr_due"] is None


def test_a_ticket_that_completed_before_on_complete_was_set_gets_no_pull_request_from_a_sync(
        tmp_path, monkeypatch, github):
    repo = _setup(tmp_path, monkeypatch, github)
    complete_pr_ticket(tmp_path, repo, github, open_pr=False)
    (tmp_path / "middle.toml").write_text((tmp_path / "middle.toml").read_text().replace(
        "[memory]", '[run]\non_complete = "pr"\n[memory]'))
    result = invoke("sync", "--from", "github:me/app", "--fake")
    assert result.exit_code == 0, result.output
    assert "pull request" not in result.output and not github.requests_to("/repos/me/app/pulls", "POST")


def test_a_run_killed_after_its_pull_request_was_opened_and_recorded_leaves_the_sync_only_the_clear(
        tmp_path, monkeypatch, github, claude_cli):
    """`pr.proposed`: `[run] on_complete = "pr"` opened the pull request and recorded it, the
    run's pr_due not cleared. The next `middle sync` finds it up to date and clears pr_due, with
    no second pull request, push or description rewrite; the one after does nothing."""
    _setup(tmp_path, monkeypatch, github, run='[run]\non_complete = "pr"\n')
    github.add_repo("me/app")
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "t1.md").write_text(TICKET)
    _killed("run", "t1", "--tickets", "tickets", at="pr.proposed:1", cwd=tmp_path)
    with TicketStore(tmp_path / ".middle" / "middle.sqlite3") as s:
        run = s.latest_run("t1")
        assert run is not None and run["pr_due"] == "open" and run["pr_state"] == "open" and run["pr_url"]
    url = run["pr_url"]
    tip = out(tmp_path / "remote.git", "rev-parse", "middle/t1")
    result = invoke("sync", "--tickets", "tickets", "--fake")
    assert result.exit_code == 0, result.output
    assert f"already has its pull request: {url} (up to date)" in " ".join(result.output.split()), result.output
    again = invoke("sync", "--tickets", "tickets", "--fake")
    assert again.exit_code == 0 and "pull request" not in again.output, again.output
    assert len(github.requests_to("/repos/me/app/pulls", "POST")) == 1
    assert not [r for r in github.requests if r.method == "PATCH"]
    assert out(tmp_path / "remote.git", "rev-parse", "middle/t1") == tip
    with TicketStore(tmp_path / ".middle" / "middle.sqlite3") as s:
        run = s.latest_run("t1")
        assert run is not None and run["pr_due"] is None and run["pr_url"] == url


def test_a_round_killed_after_its_pull_request_was_brought_up_to_date_leaves_the_sync_only_the_clear(
        tmp_path, monkeypatch, github, claude_cli):
    """`pr.proposed` of a review round: the round's end hook rewrote the open pull request's
    description, pr_due ("update") not cleared. The next sync rewrites nothing and clears it."""
    repo = _setup(tmp_path, monkeypatch, github)
    complete_pr_ticket(tmp_path, repo, github)
    _killed("feedback", "gh-1", "Create `extra.py` with:\n```python\nVALUE = 1\n```\n", at="pr.proposed:1",
            cwd=tmp_path)
    assert "`extra.py`" in github.repos["me/app"].pulls[2]["body"]  # brought up to date before the kill
    assert _pr_due(tmp_path) == "update"
    patched = len(github.requests_to("/repos/me/app/pulls/2", "PATCH"))
    result = invoke("sync", "--from", "github:me/app", "--fake")
    assert result.exit_code == 0, result.output
    assert f"already has its pull request: {PR} (up to date)" in " ".join(result.output.split()), result.output
    assert _pr_due(tmp_path) is None
    assert len(github.requests_to("/repos/me/app/pulls/2", "PATCH")) == patched
