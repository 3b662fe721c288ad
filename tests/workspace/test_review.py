"""Review with real git: diff, merge (fast-forward, merge commit, conflict, dirty tree), discard,
revert of a merged ticket, and gc. A conflict or a refusal must leave everything as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from review_helpers import Memory, complete, snapshot

from orchestrator.errors import GitError, TicketError
from orchestrator.testing import make_repo
from orchestrator.testing.git import commit_all
from orchestrator.workspace import Review, Worktrees
from orchestrator.workspace.gc import collect
from orchestrator.workspace.git import branch_commit, git, out
from tickets.model import Ticket
from tickets.store import TicketStore


def test_diff_shows_the_branch_against_its_start(env):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n"})
    d = review.diff("t1")
    assert d["files"] == [{"path": "app.py", "added": 1, "deleted": 1}]
    assert "-print('v1')" in d["text"] and "+print('v2')" in d["text"]
    assert "app.py | 2" in review.diff("t1", stat=True)["text"]


def test_merge_fast_forwards_the_checked_out_base_branch(env):
    repo, store, wt, review, _ = env
    sha = complete(store, wt, repo, "t1", {"app.py": "print('v2')\n"})
    assert (repo / "app.py").read_text() == "print('v1')\n"  # untouched until merge
    result = review.merge("t1")
    assert result.status == "merged" and "fast-forward" in result.message
    assert branch_commit(repo, "main") == sha
    assert (repo / "app.py").read_text() == "print('v2')\n"  # the user's tree follows its branch
    assert out(repo, "status", "--porcelain") == ""
    assert store.get_ticket("t1").status.value == "merged"
    assert store.latest_run("t1")["merge_commit"] == sha
    assert branch_commit(repo, "middle/t1") is None and not Path(wt.path_for("t1")).exists()


def test_merge_makes_a_merge_commit_when_the_base_moved(env):
    repo, store, wt, review, _ = env
    tip = complete(store, wt, repo, "t1", {"new.py": "x = 1\n"})
    (repo / "README.md").write_text("app, edited by the user\n")
    user = commit_all(repo, "user edit")
    result = review.merge("t1")
    assert result.status == "merged" and "merge commit" in result.message
    head = branch_commit(repo, "main")
    assert out(repo, "rev-parse", f"{head}^1", f"{head}^2").split() == [user, tip]
    assert (repo / "new.py").exists() and "edited by the user" in (repo / "README.md").read_text()


def test_a_conflict_changes_nothing_and_names_the_files(env):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"app.py": "print('ticket')\n"})
    (repo / "app.py").write_text("print('user')\n")
    commit_all(repo, "user edit")
    before = snapshot(repo)
    result = review.merge("t1")
    assert result.status == "conflict" and result.conflicts == ["app.py"]
    assert "app.py" in result.message and "left as they were" in result.message
    assert snapshot(repo) == before
    assert store.get_ticket("t1").status.value == "conflict"
    assert branch_commit(repo, "middle/t1")  # kept, to be resolved


def test_merge_refuses_when_the_user_has_uncommitted_changes_in_those_files(env):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n"})
    (repo / "app.py").write_text("print('my own work in progress')\n")
    (repo / "notes.txt").write_text("untracked and unrelated\n")
    before = snapshot(repo)
    with pytest.raises(GitError, match="uncommitted changes .* to app.py would be overwritten. Nothing was changed"):
        review.merge("t1")
    assert snapshot(repo) == before
    assert store.get_ticket("t1").status.value == "complete"


def test_merge_goes_ahead_when_uncommitted_changes_are_elsewhere(env):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"new.py": "x = 1\n"})
    (repo / "README.md").write_text("my edit\n")
    assert review.merge("t1").status == "merged"
    assert (repo / "README.md").read_text() == "my edit\n" and (repo / "new.py").exists()


def test_merge_of_a_base_branch_not_checked_out_moves_only_the_ref(env):
    repo, store, wt, review, _ = env
    git(repo, "checkout", "--quiet", "-b", "feature")
    sha = complete(store, wt, Path(repo), "t1", {"new.py": "x = 1\n"})  # base: feature (checked out)
    git(repo, "checkout", "--quiet", "main")
    before = snapshot(repo)
    review.merge("t1")
    assert branch_commit(repo, "feature") == sha
    assert snapshot(repo)["files"] == before["files"]


def test_revert_of_a_merged_ticket_adds_a_revert_commit_and_deletes_its_doc(env):
    repo, store, wt, review, memory = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n", "extra.py": "y = 2\n"}, doc="Ticket: t1 doc")
    review.merge("t1")
    (repo / "README.md").write_text("later, unrelated work\n")
    later = commit_all(repo, "later")
    result = review.revert("t1")
    assert result.status == "reverted" and "revert commit" in result.message and "2 file(s)" in result.message
    assert "1 memory doc(s) deleted" in result.message and memory.deleted == [("p", ["Ticket: t1 doc"])]
    head = branch_commit(repo, "main")
    assert out(repo, "rev-parse", f"{head}^") == later
    assert (repo / "app.py").read_text() == "print('v1')\n" and not (repo / "extra.py").exists()
    assert (repo / "README.md").read_text() == "later, unrelated work\n"
    assert store.latest_run("t1")["revert_commit"] == head
    assert store.get_ticket("t1").status.value == "reverted"


def test_revert_of_an_unmerged_ticket_is_discard(env):
    repo, store, wt, review, memory = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n"}, doc="d1")
    before = snapshot(repo)
    result = review.revert("t1")
    assert result.status == "discarded" and "removed its worktree and branch middle/t1" in result.message
    assert branch_commit(repo, "middle/t1") is None and memory.deleted == [("p", ["d1"])]
    assert snapshot(repo)["files"] == before["files"]


def test_revert_and_discard_of_a_ticket_that_changed_nothing_say_so(env):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {})
    assert "changed no files" in review.merge("t1").message
    assert "changed no files, so no code was reverted" in review.revert("t1").message


def test_revert_of_a_failed_ticket_keeps_the_failure(env):
    repo, store, wt, review, _ = env
    store.upsert_ticket(Ticket(id="t1", project_id="p", title="T", project_path=str(repo)))
    run_id = store.claim_new_run("t1", ["pending"])
    assert run_id is not None
    store.end_run("t1", run_id, "failed", "turn limit reached")
    with pytest.raises(TicketError, match="failed and was never merged or indexed.*middle discard t1"):
        review.revert("t1")
    assert store.get_ticket("t1").status.value == "failed"


def test_discard_refuses_a_merged_ticket(env):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"new.py": "1\n"})
    review.merge("t1")
    with pytest.raises(TicketError, match="is merged: undo it with `middle revert t1`"):
        review.discard("t1")


def test_discard_refuses_to_delete_untracked_files_in_the_worktree_unless_forced(env):
    repo, store, wt, review, memory = env
    complete(store, wt, repo, "t1", {"new.py": "1\n", ".gitignore": "*.log\n"}, doc="d1")
    work = wt.path_for("t1")
    (work / "notes.txt").write_text("the user's own notes\n")
    (work / "sub").mkdir()
    (work / "sub" / "draft.py").write_text("x\n")
    (work / "run.log").write_text("ignored by the project: not the user's to keep\n")
    for undo in (review.discard, review.revert):  # revert of an unmerged ticket is discard
        with pytest.raises(TicketError, match=r"worktree .* holds files git does not track \(notes.txt, "
                                              r"sub/draft.py\), which discarding would delete: .* "
                                              r"`middle discard t1 --force`. Nothing was changed"):
            undo("t1")
    assert (work / "notes.txt").exists() and branch_commit(repo, "middle/t1")
    assert store.get_ticket("t1").status.value == "complete" and memory.deleted == []
    result = review.discard("t1", force=True)
    assert result.status == "discarded" and "and 2 untracked file(s) in it (--force)" in result.message
    assert not work.exists() and branch_commit(repo, "middle/t1") is None


def test_gc_removes_what_no_ticket_needs(env, tmp_path):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "keep", {"a.py": "1\n"})  # complete: kept for review
    wt.prepare("ghost", repo)  # a worktree of a ticket nobody knows (a crashed, deleted run)
    complete(store, wt, repo, "gone", {"g.py": "1\n"})
    review.discard("gone")
    wt.prepare("gone", repo)  # a leftover of a discarded ticket, at its recorded start
    assert collect(store, wt, [repo], dry_run=True).worktrees == [str(wt.path_for(t)) for t in ("ghost", "gone")]
    assert (wt.path_for("ghost")).exists()
    report = collect(store, wt, [repo])
    assert report.worktrees == [str(wt.path_for(t)) for t in ("ghost", "gone")] and report.kept == []
    assert sorted(report.branches) == [f"{repo}:middle/ghost", f"{repo}:middle/gone"]
    assert not wt.path_for("ghost").exists() and wt.path_for("keep").exists()
    assert g_branches(repo) == ["main", "middle/keep"]


def test_gc_keeps_work_it_cannot_account_for_unless_forced(env, tmp_path):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"a.py": "1\n"})
    review.discard("t1")
    ws = wt.prepare("t1", repo)  # a leftover worktree of the discarded ticket...
    (Path(ws.path) / "notes.txt").write_text("the user's own notes\n")  # ...holding unsaved work
    (Path(ws.path) / "app.py").write_text("print('edited by hand')\n")
    lost = wt.prepare("t2", repo)  # a worktree of a ticket nobody knows, with a commit only there
    (Path(lost.path) / "b.py").write_text("b\n")
    commit_all(lost.path, "work on no other branch")
    git(repo, "branch", "middle/mine")  # the user's own branch under middle/
    report = collect(store, wt, [repo])
    assert report.worktrees == [] and report.branches == []
    kept = "\n".join(report.kept)
    assert f"worktree {wt.path_for('t1')}: it holds uncommitted or untracked files (app.py, notes.txt)" in kept
    assert f"worktree {wt.path_for('t2')}: its commit" in kept and "on no other branch" in kept
    assert f"branch {repo}:middle/mine: middle did not create it" in kept
    assert "`middle gc --force`" in kept and f"`git -C {repo} branch -D middle/mine`" in kept
    assert (Path(ws.path) / "notes.txt").exists() and (Path(lost.path) / "b.py").exists()
    assert g_branches(repo) == ["main", "middle/mine", "middle/t1", "middle/t2"]
    forced = collect(store, wt, [repo], force=True)
    assert forced.kept == [] and len(forced.worktrees) == 2 and len(forced.branches) == 3
    assert g_branches(repo) == ["main"] and not wt.path_for("t1").exists()


def g_branches(repo):
    from orchestrator.workspace.git import branches

    return branches(repo)


def test_revert_after_the_backend_changed_deletes_the_doc_from_the_old_store_and_says_where(env, tmp_path):
    from orchestrator.memory.facade import MemoryFacade
    from orchestrator.plugins.manager import PluginRegistry

    repo, store, wt, _, _ = env
    registry = PluginRegistry(load_entry_points=False)
    old = MemoryFacade(tmp_path / "mem", "bm25", {}, registry)
    old.index("p", ["Ticket: t1 doc"])
    old.close()
    complete(store, wt, repo, "t1", {"new.py": "x = 1\n"}, doc="Ticket: t1 doc")
    store.add_memory_doc("t1", "p", "Ticket: t1 doc", backend="bm25")
    new = MemoryFacade(tmp_path / "mem", "hybrid", {"embedder": "hashing"}, registry)  # config changed
    try:
        result = Review(store, wt, new).revert("t1")  # complete, not merged: its branch is discarded
        assert result.memory_docs_deleted == 1
        assert "1 from the bm25 store in" in result.message and "became 'hybrid'" in result.message
    finally:
        new.close()
    old = MemoryFacade(tmp_path / "mem", "bm25", {}, registry)
    assert old.list_docs("p") == []
    old.close()


# -- a ticket's change is what merging it did to the base, whatever its branch's history --------

@pytest.fixture
def any_env(tmp_path, store_target):
    """As `env`, on each engine the ticket store runs on (the merge record lives there)."""
    repo = make_repo(tmp_path / "repo", {"app.py": "print('v1')\n", "README.md": "app\n"})
    store = TicketStore(store_target)
    wt = Worktrees(tmp_path / "state" / "worktrees")
    yield repo, store, wt, Review(store, wt, Memory())
    store.close()


def _resolve_by_merging_the_base(wt, tid, path, text):
    """What the conflict message tells the user: in the ticket's worktree, `git merge main`,
    fix the file, commit."""
    work = wt.path_for(tid)
    assert git(work, "merge", "--quiet", "main", check=False).returncode != 0  # the conflict
    (work / path).write_text(text)
    commit_all(work, f"merge main into middle/{tid}")


def test_revert_of_a_branch_that_merged_the_base_in_undoes_only_its_merge(any_env):
    repo, store, wt, review = any_env
    complete(store, wt, repo, "ta", {"x.py": "X = 'a'\n"})
    complete(store, wt, repo, "tb", {"x.py": "X = 'b'\n"})
    complete(store, wt, repo, "tc", {"c.py": "C = 1\n"})
    review.merge("tc")
    review.merge("ta")
    assert review.merge("tb").status == "conflict"
    _resolve_by_merging_the_base(wt, "tb", "x.py", "X = 'a and b'\n")
    # before merging, its change is what merging would do: x.py only, not main's c.py
    assert [f["path"] for f in review.diff("tb")["files"]] == ["x.py"]
    assert "-X = 'a'" in review.diff("tb")["text"] and "c.py" not in review.diff("tb", stat=True)["text"]
    assert "fast-forward" in review.merge("tb").message
    run = store.latest_run("tb")
    assert run["premerge_commit"] and run["merge_commit"] == branch_commit(repo, "main")
    assert [f["path"] for f in run["changes"]] == ["x.py"]
    assert [f["path"] for f in review.diff("tb")["files"]] == ["x.py"]  # merged: the same change
    result = review.revert("tb")
    assert result.status == "reverted" and "1 file(s)" in result.message
    assert (repo / "c.py").read_text() == "C = 1\n"  # tc's code stays
    assert (repo / "x.py").read_text() == "X = 'a'\n"  # ta's version, as before tb's merge
    assert store.get_ticket("tc").status.value == "merged"


def test_revert_of_a_rebased_branch_leaves_the_other_tickets_code(any_env):
    repo, store, wt, review = any_env
    complete(store, wt, repo, "ta", {"a.py": "A = 1\n"})
    complete(store, wt, repo, "tb", {"b.py": "B = 1\n", "app.py": "print('b')\n"})
    review.merge("ta")
    work = wt.path_for("tb")
    git(work, *["-c", "user.name=u", "-c", "user.email=u@x"], "rebase", "--quiet", "main")
    assert [f["path"] for f in review.diff("tb")["files"]] == ["app.py", "b.py"]
    assert "fast-forward" in review.merge("tb").message
    review.revert("tb")
    assert (repo / "a.py").exists() and not (repo / "b.py").exists()
    assert (repo / "app.py").read_text() == "print('v1')\n"


def test_revert_of_several_commits_merged_with_a_merge_commit(any_env):
    repo, store, wt, review = any_env
    complete(store, wt, repo, "t1", {"one.py": "1\n"})
    work = wt.path_for("t1")
    (work / "two.py").write_text("2\n")
    commit_all(work, "the user's second commit on the ticket's branch")
    (work / "one.py").write_text("1, edited\n")
    commit_all(work, "and a third")
    complete(store, wt, repo, "t2", {"other.py": "o\n"})
    review.merge("t2")
    assert "merge commit" in review.merge("t1").message
    assert sorted(f["path"] for f in store.latest_run("t1")["changes"]) == ["one.py", "two.py"]
    assert "2 file(s)" in review.revert("t1").message
    assert not (repo / "one.py").exists() and not (repo / "two.py").exists()
    assert (repo / "other.py").read_text() == "o\n"
    assert out(repo, "status", "--porcelain") == ""


def test_a_long_title_gives_short_merge_and_revert_subjects(env):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"one.py": "1\n"})
    store.upsert_ticket(Ticket(id="t1", project_id="p", title="Long " * 2000, project_path=str(repo)))
    (repo / "README.md").write_text("moved on\n")
    commit_all(repo, "the base moved: merging makes a merge commit")
    assert "merge commit" in review.merge("t1").message
    review.revert("t1")
    merge_subject, revert_subject = out(repo, "log", "-2", "--format=%s").splitlines()[::-1]
    assert merge_subject.startswith("Merge middle/t1: Long Long") and len(merge_subject) <= 72
    assert revert_subject.startswith('Revert "Long Long') and len(revert_subject) <= 72
    assert ("Long " * 2000).strip() in out(repo, "log", "-1", "--format=%b")


def test_merge_refuses_while_the_tickets_worktree_holds_uncommitted_edits(env):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n"})
    (wt.path_for("t1") / "app.py").write_text("print('fixed by hand, not committed')\n")
    before = snapshot(repo)
    with pytest.raises(TicketError, match=r"has changes not committed on its branch \(app.py\).*Nothing was changed"):
        review.merge("t1")
    assert snapshot(repo) == before and store.get_ticket("t1").status.value == "complete"
    assert (wt.path_for("t1") / "app.py").read_text() == "print('fixed by hand, not committed')\n"
    commit_all(wt.path_for("t1"), "the fix")
    assert review.merge("t1").status == "merged"
    assert (repo / "app.py").read_text() == "print('fixed by hand, not committed')\n"


def test_a_merge_refused_over_unsaved_edits_names_the_ticket_without_doubled_quotes(env):
    """The possessive once read `ticket 't1''s worktree`."""
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n"})
    (Path(wt.path_for("t1")) / "app.py").write_text("print('edited, not committed')\n")
    with pytest.raises(TicketError) as refused:
        review.merge("t1")
    assert str(refused.value).startswith(f"ticket t1's worktree {wt.path_for('t1')} has changes not committed")
    assert "''s" not in str(refused.value)
