"""The pull-request tickets' shared start: gh-1's issue on the fake GitHub, its fix committed on
middle/gh-1, its run recorded complete, and its pull request opened with `middle pr`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.testing.git import commit_all
from orchestrator.workspace.git import git, out
from tickets.model import Ticket
from tickets.store import TicketStore


def complete_pr_ticket(tmp_path: Path, repo: Path, github: Any, *, open_pr: bool = True, **run_fields: Any) -> None:
    """gh-1 complete on middle/gh-1 (its worktree path recorded, unless `run_fields` say otherwise),
    its pull request open (`open_pr=False`: not yet)."""
    github.add_issue("me/app", "Handle empty input", "calc() crashes on ''")
    base = out(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "--quiet", "-b", "middle/gh-1")
    (repo / "calc.py").write_text("def calc(s):\n    return s or 0\n")
    head = commit_all(repo, "Handle empty input")
    git(repo, "checkout", "--quiet", "main")
    with TicketStore(tmp_path / ".middle" / "middle.sqlite3") as s:
        s.upsert_ticket(Ticket(id="gh-1", project_id="app", title="Handle empty input", project_path=str(repo),
                               source="https://github.example/me/app/issues/1",
                               fields={"github": {"repo": "me/app", "number": 1}, "labels": []}))
        run_id = s.claim_new_run("gh-1", ("pending",))
        assert run_id is not None
        s.set_run_fields(run_id, repo=str(repo), branch="middle/gh-1", base_branch="main", base_commit=base,
                         head_commit=head, changes=[{"path": "calc.py", "added": 2, "deleted": 0}],
                         isolation="worktree",
                         **{"worktree": str(tmp_path / ".middle" / "worktrees" / "gh-1"), **run_fields})
        s.end_run("gh-1", run_id, "complete", None, ticket_reason="calc() returns 0 for empty input.")
    if open_pr:
        result = CliRunner().invoke(main, ["pr", "gh-1"])
        assert result.exit_code == 0, result.output
