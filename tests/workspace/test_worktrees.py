"""A ticket's worktree and branch, with real git: made from the base branch, committed, removed."""

from __future__ import annotations

import pytest

from orchestrator.errors import GitError
from orchestrator.testing import make_repo
from orchestrator.workspace import Worktrees
from orchestrator.workspace.git import branch_commit, git, out


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "repo", {"calc/__init__.py": "", "README.md": "calc\n"})


def test_prepare_makes_a_branch_and_worktree_from_the_base_commit(tmp_path, repo):
    wt = Worktrees(tmp_path / "state" / "worktrees")
    ws = wt.prepare("t1", repo)
    assert ws.branch == "middle/t1" and ws.base_branch == "main"
    assert ws.base_commit == branch_commit(repo, "main")
    assert ws.path == ws.cwd == str(tmp_path / "state" / "worktrees" / "t1")
    assert out(ws.path, "rev-parse", "--abbrev-ref", "HEAD") == "middle/t1"
    assert (tmp_path / "state" / "worktrees" / "t1" / "calc" / "__init__.py").exists()


def test_a_start_from_dependency_branches_says_which_were_merged_in(tmp_path, repo):
    wt = Worktrees(tmp_path / "state" / "worktrees")
    for tid in ("a", "b"):
        ws = wt.prepare(tid, repo)
        (tmp_path / "state" / "worktrees" / tid / f"{tid}.py").write_text(f"{tid} = 1\n")
        wt.commit(ws, f"ticket {tid}\n")
    git(repo, "branch", "middle/old", "main")  # a dependency whose commits main holds already
    main = branch_commit(repo, "main")
    ws = wt.prepare("c", repo, start_from=["middle/a", "middle/old", "middle/b"])
    assert ws.merged_dependencies == ["middle/a", "middle/b"]  # middle/old added nothing
    assert out(ws.path, "rev-list", "--parents", "-n", "1", "HEAD").split()[1:] == [
        branch_commit(repo, "middle/a"), branch_commit(repo, "middle/b")]  # a fast-forward, then a merge
    assert ws.origin() == (f"main with its dependencies' branches middle/a, middle/b merged in, "
                           f"at {ws.base_commit[:10]}")
    plain = wt.prepare("d", repo, start_from=["middle/old"])
    assert plain.merged_dependencies == [] and plain.origin() == f"main at {main[:10]}"


def test_a_project_in_a_subfolder_works_in_the_same_subfolder_of_the_worktree(tmp_path, repo):
    ws = Worktrees(tmp_path / "wts").prepare("t1", repo / "calc")
    assert ws.cwd == str(tmp_path / "wts" / "t1" / "calc")


def test_commit_records_the_change_and_leaves_the_users_tree_alone(tmp_path, repo):
    wt = Worktrees(tmp_path / "wts")
    ws = wt.prepare("t1", repo)
    (tmp_path / "wts" / "t1" / "calc" / "greet.py").write_text("def greet():\n    return 'hi'\n")
    (tmp_path / "wts" / "t1" / "README.md").write_text("calc, with greetings\n")
    assert {c["path"] for c in wt.changes(ws)} == {"calc/greet.py", "README.md"}
    sha, changes = wt.commit(ws, "Add greet\n\nA greeting.\n")
    assert sha and sha == branch_commit(repo, "middle/t1")
    assert sorted((c["path"], c["added"], c["deleted"]) for c in changes) == [
        ("README.md", 1, 1), ("calc/greet.py", 2, 0)]
    assert out(repo, "log", "-1", "--format=%s%n%n%b", "middle/t1").startswith("Add greet\n\nA greeting.")
    # the user's working tree and branch did not move
    assert not (repo / "calc" / "greet.py").exists()
    assert (repo / "README.md").read_text() == "calc\n"
    assert branch_commit(repo, "main") == ws.base_commit
    # committing again (a resumed run) finds the same commit
    assert wt.commit(ws, "Add greet\n") == (sha, changes)


def test_commit_of_no_change_says_so(tmp_path, repo):
    wt = Worktrees(tmp_path / "wts")
    ws = wt.prepare("t1", repo)
    assert wt.commit(ws, "nothing\n") == (None, [])


def test_commit_author_falls_back_when_git_config_has_none(tmp_path, repo, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no global user.name / user.email
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    wt = Worktrees(tmp_path / "wts")
    ws = wt.prepare("t1", repo)
    (tmp_path / "wts" / "t1" / "x.py").write_text("x = 1\n")
    sha, _ = wt.commit(ws, "x\n")
    assert out(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", sha) == (
        "middle-agent <middle@localhost>|middle-agent <middle@localhost>")


def test_commit_author_comes_from_git_config(tmp_path, repo):
    git(repo, "config", "user.name", "Ada")
    git(repo, "config", "user.email", "ada@example.com")
    wt = Worktrees(tmp_path / "wts")
    ws = wt.prepare("t1", repo)
    (tmp_path / "wts" / "t1" / "x.py").write_text("x = 1\n")
    sha, _ = wt.commit(ws, "x\n")
    assert out(repo, "log", "-1", "--format=%an <%ae>", sha) == "Ada <ada@example.com>"


def test_a_new_run_replaces_the_old_worktree_and_branch(tmp_path, repo):
    wt = Worktrees(tmp_path / "wts")
    ws = wt.prepare("t1", repo)
    (tmp_path / "wts" / "t1" / "half.py").write_text("half done\n")
    wt.commit(ws, "half\n")
    again = wt.prepare("t1", repo)
    assert again.base_commit == branch_commit(repo, "main") == branch_commit(repo, "middle/t1")
    assert not (tmp_path / "wts" / "t1" / "half.py").exists()


def test_base_branch_from_config_and_a_missing_one(tmp_path, repo):
    git(repo, "branch", "develop")
    ws = Worktrees(tmp_path / "wts", base_branch="develop").prepare("t1", repo)
    assert ws.base_branch == "develop"
    with pytest.raises(GitError, match="base branch 'nope' does not exist.*branches: develop, main"):
        Worktrees(tmp_path / "wts", base_branch="nope").prepare("t2", repo)


def test_not_a_repository_no_commit_and_detached_head_say_what_to_do(tmp_path, repo):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(GitError, match="not in a git repository.*git init.*isolation = \"none\""):
        Worktrees(tmp_path / "wts").prepare("t1", plain)
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "--quiet")
    with pytest.raises(GitError, match="no commit yet.*commit your files first"):
        Worktrees(tmp_path / "wts").prepare("t1", empty)
    git(repo, "checkout", "--quiet", "--detach")
    with pytest.raises(GitError, match="detached HEAD.*base_branch"):
        Worktrees(tmp_path / "wts").prepare("t1", repo)


def test_remove_deletes_worktree_and_branch(tmp_path, repo):
    wt = Worktrees(tmp_path / "wts")
    wt.prepare("t1", repo)
    wt.remove(repo, "t1")
    assert not (tmp_path / "wts" / "t1").exists()
    assert branch_commit(repo, "middle/t1") is None
    assert "wts/t1" not in out(repo, "worktree", "list")


def _clone_of_a_bare_remote(tmp_path, repo):
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(repo), str(bare))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "--quiet", str(bare), str(clone))
    return bare, clone


def test_a_fetch_that_fails_for_a_moment_is_tried_again(tmp_path, repo):
    import threading

    bare, clone = _clone_of_a_bare_remote(tmp_path, repo)
    away = tmp_path / "remote-away.git"
    bare.rename(away)  # the remote is unreachable for the first attempt
    timer = threading.Timer(0.2, lambda: away.rename(bare))
    timer.start()
    try:
        ws = Worktrees(tmp_path / "wts", remote="origin").prepare("t1", clone)
    finally:
        timer.join()
    assert ws.base_commit == branch_commit(repo, "main")


def test_a_fetch_that_keeps_failing_is_a_git_error_naming_the_clone(tmp_path, repo):
    bare, clone = _clone_of_a_bare_remote(tmp_path, repo)
    bare.rename(tmp_path / "gone.git")
    with pytest.raises(GitError, match="fetch"):
        Worktrees(tmp_path / "wts", remote="origin").prepare("t1", clone)
