"""Where a ticket starts in a team ([project] repo_url, a bare repository standing for the shared
one): a developer's run starts from the shared base branch as it is now (fetched), or from its own
when that holds it already, and is refused when both moved on; a worker's clone of a remote whose
HEAD names another branch uses base_branch; a failed clone is made again on the next try. Real git."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.settings import Config
from orchestrator.errors import GitError
from orchestrator.running.fleet import REMOTE, ensure_clone
from orchestrator.testing import make_repo
from orchestrator.testing.git import commit_all
from orchestrator.workspace import Worktrees
from orchestrator.workspace.git import branch_commit, git, out


def shared_repo(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    seed = make_repo(tmp_path / "seed", files or {"app.py": "print('v1')\n"})
    shared = tmp_path / "shared.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(shared))
    return shared


def push_from_elsewhere(tmp_path: Path, shared: Path, name: str, text: str) -> str:
    """Another machine commits `name` on main and pushes it; returns the commit."""
    other = tmp_path / f"other-{name}"
    if not other.exists():
        git(tmp_path, "clone", "--quiet", "--branch", "main", str(shared), str(other))
    (other / name).write_text(text)
    sha = commit_all(other, f"add {name}")
    git(other, "push", "--quiet", "origin", "main")
    return sha


# -- a developer's run in a team project ------------------------------------------------------

@pytest.fixture
def desk(tmp_path):
    """(the shared repository, a developer's clone of it, their Worktrees with repo_url)."""
    shared = shared_repo(tmp_path)
    repo = tmp_path / "desk"
    git(tmp_path, "clone", "--quiet", str(shared), str(repo))
    return shared, repo, Worktrees(tmp_path / "state" / "worktrees", "main", push_url=str(shared))


def test_a_run_starts_from_the_shared_base_branch_when_this_one_is_behind(desk, tmp_path):
    shared, repo, wt = desk
    merged_elsewhere = push_from_elsewhere(tmp_path, shared, "t1.py", "T1 = 1\n")
    mine = branch_commit(repo, "main")
    ws = wt.prepare("t2", repo)
    assert ws.base_commit == merged_elsewhere and (Path(ws.path) / "t1.py").read_text() == "T1 = 1\n"
    assert branch_commit(repo, "main") == mine  # the developer's own branch is left as it was


def test_a_run_keeps_this_base_branch_when_it_holds_the_shared_one(desk):
    shared, repo, wt = desk
    (repo / "local.py").write_text("LOCAL = 1\n")
    ahead = commit_all(repo, "not pushed yet")
    assert wt.prepare("t2", repo).base_commit == ahead


def test_a_run_is_refused_when_both_base_branches_moved_on(desk, tmp_path):
    shared, repo, wt = desk
    push_from_elsewhere(tmp_path, shared, "t1.py", "T1 = 1\n")
    (repo / "local.py").write_text("LOCAL = 1\n")
    commit_all(repo, "not pushed yet")
    with pytest.raises(GitError, match="have both moved on: fetch it"):
        wt.prepare("t2", repo)
    assert not wt.path_for("t2").exists() and branch_commit(repo, "middle/t2") is None


def test_without_repo_url_a_run_starts_from_this_base_branch(desk, tmp_path):
    shared, repo, _ = desk
    push_from_elsewhere(tmp_path, shared, "t1.py", "T1 = 1\n")
    wt = Worktrees(tmp_path / "solo" / "worktrees", "main")
    assert wt.prepare("t2", repo).base_commit == branch_commit(repo, "main")


# -- a worker's clone -------------------------------------------------------------------------

def worker_config(tmp_path: Path, url: Path) -> Config:
    home = tmp_path / "worker"
    return Config(root=home, state_dir=str(home / "state"),
                  project={"path": ".", "repo_url": str(url), "base_branch": "main"})


def worker_start(cfg: Config) -> Path:
    """What a worker does before a ticket: its clone, then a worktree from the remote's main."""
    clone = ensure_clone(cfg)
    return Path(Worktrees(cfg.worktrees_path, "main", remote=REMOTE).prepare("t1", clone).path)


def test_a_clone_of_a_remote_whose_head_names_another_branch_uses_base_branch(tmp_path):
    shared = shared_repo(tmp_path)
    git(shared, "symbolic-ref", "HEAD", "refs/heads/master")  # `git init --bare` then `git push main`
    cfg = worker_config(tmp_path, shared)
    assert (worker_start(cfg) / "app.py").read_text() == "print('v1')\n"
    assert out(cfg.clone_path, "symbolic-ref", "--short", "HEAD") == "main"


def test_a_clone_of_a_remote_whose_head_is_another_real_branch_starts_tickets_from_base_branch(tmp_path):
    shared = shared_repo(tmp_path)
    git(shared, "branch", "trunk", "main")
    git(shared, "symbolic-ref", "HEAD", "refs/heads/trunk")
    push_from_elsewhere(tmp_path, shared, "on_main.py", "X = 1\n")
    assert (worker_start(worker_config(tmp_path, shared)) / "on_main.py").exists()


def test_a_clone_of_an_empty_remote_fails_and_is_made_again_once_it_has_the_branch(tmp_path):
    shared = tmp_path / "shared.git"
    git(tmp_path, "init", "--quiet", "--bare", str(shared))
    cfg = worker_config(tmp_path, shared)
    with pytest.raises(GitError, match="it has no branch main .*push main there first"):
        ensure_clone(cfg)
    assert not cfg.clone_path.exists() and list(cfg.clone_path.parent.iterdir()) == [cfg.state_path / "worktrees.lock"]
    seed = make_repo(tmp_path / "seed", {"app.py": "print('v1')\n"})
    git(seed, "push", "--quiet", str(shared), "main")
    assert (worker_start(cfg) / "app.py").read_text() == "print('v1')\n"


def test_an_empty_clone_left_by_an_earlier_try_is_made_again(tmp_path):
    shared = tmp_path / "shared.git"
    git(tmp_path, "init", "--quiet", "--bare", str(shared))
    cfg = worker_config(tmp_path, shared)
    cfg.clone_path.parent.mkdir(parents=True)
    git(tmp_path, "clone", "--quiet", "--origin", REMOTE, str(shared), str(cfg.clone_path))  # what was left
    seed = make_repo(tmp_path / "seed", {"app.py": "print('v1')\n"})
    git(seed, "push", "--quiet", str(shared), "main")
    assert (worker_start(cfg) / "app.py").read_text() == "print('v1')\n"


def test_an_unreachable_remote_is_one_clear_error_and_cloned_once_it_is_there(tmp_path):
    shared = tmp_path / "not-yet.git"
    cfg = worker_config(tmp_path, shared)
    with pytest.raises(GitError, match="cannot clone \\[project\\] repo_url .*does not exist") as caught:
        ensure_clone(cfg)
    assert "\n" not in str(caught.value) and not cfg.clone_path.exists()
    seed = make_repo(tmp_path / "seed", {"app.py": "print('v1')\n"})
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(shared))
    assert (worker_start(cfg) / "app.py").read_text() == "print('v1')\n"
