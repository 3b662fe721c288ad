"""Merges reach the team: with [project] repo_url (a bare repository standing for the shared one),
`middle merge` and `middle revert` push the base branch there; when another machine moved it
meanwhile they are refused with one `error:` line, and nothing changes here or there. Real git,
`middle` as a real process."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_review_cli import complete, middle, one_error_line

from orchestrator.config.settings import load_config
from orchestrator.testing import make_repo
from orchestrator.testing.git import commit_all, snapshot
from orchestrator.workspace.git import branch_commit, git, out
from tickets.store import TicketStore


@pytest.fixture
def team(tmp_path: Path) -> tuple[Path, Path]:
    """(the shared bare repository, a developer's project: `repo/`, a clone of it, and tickets)."""
    seed = make_repo(tmp_path / "seed", {"app.py": "print('v1')\n"})
    shared = tmp_path / "shared.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(shared))
    desk = tmp_path / "desk"
    git(tmp_path, "clone", "--quiet", str(shared), str(desk / "repo"))
    (desk / "tickets").mkdir()
    (desk / "tickets" / "t1.md").write_text("---\ntitle: Ticket t1\nproject: demo\n---\nDo it.\n")
    (desk / "middle.toml").write_text(
        f'[project]\nid = "demo"\npath = "repo"\nrepo_url = "{shared}"\nbase_branch = "main"\n')
    return shared, desk


def another_machine_pushes(tmp_path: Path, shared: Path) -> str:
    """Someone else moves main on the shared repository; returns its new commit."""
    other = tmp_path / "other"
    git(tmp_path, "clone", "--quiet", str(shared), str(other))
    (other / "notes.md").write_text("from another machine\n")
    sha = commit_all(other, "another machine's work")
    git(other, "push", "--quiet", "origin", "main")
    return sha


def holds(repo: Path, branch: str, commit: str) -> bool:
    return git(repo, "merge-base", "--is-ancestor", commit, branch, check=False).returncode == 0


def status(desk: Path, tid: str) -> str:
    with TicketStore(load_config(desk / "middle.toml", environ={}).db_path) as store:
        return store.get_ticket(tid).status.value


def test_merge_pushes_the_base_branch_to_the_shared_repository(team):
    shared, desk = team
    complete(desk, "t1", {"app.py": "print('v2')\n"})
    result = middle(desk, "merge", "t1")
    assert "merged ticket t1 into main" in result.stdout and "pushed main" in result.stdout, result.stdout
    assert out(shared, "rev-parse", "main") == branch_commit(desk / "repo", "main")
    assert out(shared, "show", "main:app.py") == "print('v2')"


def test_merge_is_refused_when_the_shared_base_branch_moved_and_nothing_changes(team, tmp_path):
    shared, desk = team
    complete(desk, "t1", {"app.py": "print('v2')\n"})
    theirs = another_machine_pushes(tmp_path, shared)
    before, shared_refs = snapshot(desk / "repo"), out(shared, "for-each-ref")
    result = middle(desk, "merge", "t1", code=1)
    one_error_line(result, "cannot merge ticket t1", "main on the shared repository", "fetch", "try again")
    assert snapshot(desk / "repo") == before and out(shared, "for-each-ref") == shared_refs
    assert status(desk, "t1") == "complete"
    # As it says: fetch, then try again; the merge then holds the other machine's work too.
    git(desk / "repo", "pull", "--quiet", "--no-rebase", "origin", "main")
    middle(desk, "merge", "t1")
    assert holds(shared, "main", theirs) and out(shared, "show", "main:app.py") == "print('v2')"
    assert status(desk, "t1") == "merged"


def test_revert_pushes_and_is_refused_when_the_shared_base_branch_moved(team, tmp_path):
    shared, desk = team
    complete(desk, "t1", {"app.py": "print('v2')\n"})
    middle(desk, "merge", "t1")
    another_machine_pushes(tmp_path, shared)
    before, shared_refs = snapshot(desk / "repo"), out(shared, "for-each-ref")
    result = middle(desk, "revert", "t1", code=1)
    one_error_line(result, "cannot revert ticket t1", "main on the shared repository", "fetch")
    assert snapshot(desk / "repo") == before and out(shared, "for-each-ref") == shared_refs
    assert status(desk, "t1") == "merged"
    git(desk / "repo", "pull", "--quiet", "--no-rebase", "origin", "main")
    result = middle(desk, "revert", "t1")
    assert "pushed main" in result.stdout, result.stdout
    assert out(shared, "rev-parse", "main") == branch_commit(desk / "repo", "main")
    assert out(shared, "show", "main:app.py") == "print('v1')" and out(shared, "show", "main:notes.md")
    assert status(desk, "t1") == "reverted"


def test_a_merge_refused_here_pushes_nothing(team):
    """Uncommitted changes in a file the merge writes: refused before the push, so the shared
    repository is not ahead of this one."""
    shared, desk = team
    complete(desk, "t1", {"app.py": "print('v2')\n"})
    (desk / "repo" / "app.py").write_text("print('my edit')\n")
    shared_refs = out(shared, "for-each-ref")
    one_error_line(middle(desk, "merge", "t1", code=1), "uncommitted changes", "app.py")
    assert out(shared, "for-each-ref") == shared_refs and status(desk, "t1") == "complete"
