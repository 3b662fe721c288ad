"""Pushes to the shared repository are a compare-and-swap (`--force-with-lease=<ref>:<the commit
this runner last pushed or read there>`): a runner that lost its run, whose push stalled and
lands after the new owner's, overwrites nothing, neither the ticket's branch nor its work in
progress. Two clones (two machines) of one bare repository; real git."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.testing import make_repo
from orchestrator.workspace import Worktrees, wip
from orchestrator.workspace.git import git, out
from orchestrator.workspace.worktrees import PushRefused


def _machine(tmp_path: Path, shared: Path, name: str) -> tuple[Path, Worktrees]:
    clone = tmp_path / name / "repo"
    git(tmp_path, "clone", "--quiet", str(shared), str(clone))
    return clone, Worktrees(tmp_path / name / "state" / "worktrees", base_branch="main", push_url=str(shared))


def test_a_stale_owners_late_push_does_not_overwrite_the_new_owners_branch(tmp_path):
    seed = make_repo(tmp_path / "seed", {"README.md": "calc\n"})
    shared = tmp_path / "shared.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(shared))
    a_repo, a = _machine(tmp_path, shared, "a")
    b_repo, b = _machine(tmp_path, shared, "b")

    ws_a = a.prepare("t1", a_repo)
    (Path(ws_a.path) / "a.txt").write_text("a\n")
    first, _ = a.commit(ws_a, "A's first commit")
    a.push(ws_a)
    assert out(shared, "rev-parse", "refs/heads/middle/t1") == first

    # B takes the run over: its worktree from the branch as pushed, its own commit pushed.
    ws_b, _source = b.adopt("t1", b_repo, ws_a)
    (Path(ws_b.path) / "b.txt").write_text("b\n")
    newer, _ = b.commit(ws_b, "B's commit")
    b.push(ws_b)

    # A never learnt it lost the run: its next push (a stalled one landing now) is refused.
    (Path(ws_a.path) / "late.txt").write_text("late\n")
    a.commit(ws_a, "A's late commit")
    with pytest.raises(PushRefused, match="another runner pushed it"):
        a.push(ws_a)
    assert out(shared, "rev-parse", "refs/heads/middle/t1") == newer


def test_a_stale_owners_work_in_progress_neither_replaces_nor_deletes_the_new_owners(tmp_path):
    seed = make_repo(tmp_path / "seed", {"README.md": "calc\n"})
    shared = tmp_path / "shared.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(shared))
    a_repo, a = _machine(tmp_path, shared, "a")
    b_repo, b = _machine(tmp_path, shared, "b")
    ws_a = a.prepare("t1", a_repo)
    (Path(ws_a.path) / "a.txt").write_text("a\n")
    wip.save(a, ws_a, "t1", "run-1", 1)

    ws_b, _source = b.adopt("t1", b_repo, ws_a)
    assert wip.restore(b, ws_b, "t1", "run-1")  # reads the shared ref: B's lease
    theirs = wip.save(b, ws_b, "t1", "run-1", 2)

    (Path(ws_a.path) / "stale.txt").write_text("stale\n")
    with pytest.raises(PushRefused):
        wip.save(a, ws_a, "t1", "run-1", 2)
    wip.drop(a, ws_a, "t1")  # refused too (said in the log): the ref is B's
    assert out(shared, "rev-parse", "refs/middle/wip/t1") == theirs


def test_the_owner_refused_because_a_stale_push_landed_first_pushes_again_once_it_forgets_the_lease(tmp_path):
    """(What the graph's fenced_push does after checking that the run is still its own.)"""
    seed = make_repo(tmp_path / "seed", {"README.md": "calc\n"})
    shared = tmp_path / "shared.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(shared))
    a_repo, a = _machine(tmp_path, shared, "a")
    b_repo, b = _machine(tmp_path, shared, "b")
    ws_a = a.prepare("t1", a_repo)
    (Path(ws_a.path) / "a.txt").write_text("a\n")
    a.commit(ws_a, "A's commit")
    ws_b, _source = b.adopt("t1", b_repo, ws_a)  # B read the branch: not pushed yet
    (Path(ws_b.path) / "b.txt").write_text("b\n")
    mine, _ = b.commit(ws_b, "B's commit")
    a.push(ws_a)  # the stale owner's push lands first
    with pytest.raises(PushRefused) as refused:
        b.push(ws_b)
    b.forget(refused.value.ref)
    b.push(ws_b)
    assert out(shared, "rev-parse", "refs/heads/middle/t1") == mine
