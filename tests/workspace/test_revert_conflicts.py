"""A revert that conflicts, with real git: it waits in a worktree of its own with conflict markers,
the user resolves and commits there (with the very commands the messages suggest), and `revert`
again puts it on the base branch. `--done` marks a revert made by hand, after checking that the
base branch lost the ticket's lines; a merged ticket that depends on the reverted one is named."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from review_helpers import complete

from orchestrator.errors import GitError, TicketError
from orchestrator.testing.git import commit_all
from orchestrator.workspace.git import branch_commit, branches, out

USER = {"GIT_AUTHOR_NAME": "User", "GIT_AUTHOR_EMAIL": "user@example.com", "GIT_COMMITTER_NAME": "User",
        "GIT_COMMITTER_EMAIL": "user@example.com", "GIT_EDITOR": "true"}


def run_suggested(message: str, pattern: str) -> str:
    """Run, in a shell as the user would, the command the message suggests (found by `pattern`,
    its first group); returns the command."""
    found = re.search(pattern, message)
    assert found, f"no command matching {pattern!r} in: {message}"
    command = found.group(1)
    done = subprocess.run(command, shell=True, capture_output=True, text=True, env={**os.environ, **USER})
    assert done.returncode == 0, (command, done.stdout, done.stderr)
    return command


def merged_then_built_on(env, doc="Ticket: t1 doc"):
    """t1 (print v1 -> v2) merged, then later work on main rewrote that very line."""
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n", "extra.py": "E = 1\n"}, doc=doc)
    review.merge("t1")
    (repo / "app.py").write_text("print('v3, built on v2')\n")
    return commit_all(repo, "later edit of the same line")


def resolved_in_its_worktree(env) -> Path:
    """t1's revert conflicted, then the user resolved and committed it there, as the message says."""
    merged_then_built_on(env)
    first = env[3].revert("t1")
    work = Path(first.worktree)
    (work / "app.py").write_text("print('v3, without v2')\n")
    run_suggested(first.message, r"commit \((cd .*? && git commit)\)")
    return work


def revert_dir(wt, tid="t1") -> Path:
    return wt.root.parent / "reverts" / tid


def test_a_revert_that_conflicts_waits_in_its_own_worktree_then_lands(env):
    repo, store, wt, review, memory = env
    later = merged_then_built_on(env)
    files = {p.name: p.read_text() for p in repo.iterdir() if p.is_file()}
    result = review.revert("t1")
    assert result.conflicts == ["app.py"] and result.status == "merged"
    work = revert_dir(wt)
    assert result.worktree == str(work)
    assert f"The revert waits in {work} (branch middle-revert/t1) with conflict markers" in result.message
    # nothing changed on main, in the user's files, in the ticket or in memory
    assert branch_commit(repo, "main") == later and out(repo, "status", "--porcelain") == ""
    assert {p.name: p.read_text() for p in repo.iterdir() if p.is_file()} == files
    assert store.get_ticket("t1").status.value == "merged" and memory.deleted == []
    text = (work / "app.py").read_text()
    assert "<<<<<<< HEAD\nprint('v3, built on v2')\n=======\nprint('v1')\n>>>>>>>" in text
    assert not (work / "extra.py").exists()  # the part that did not conflict is undone already

    with pytest.raises(GitError, match=r"revert of ticket t1 .* is not finished: app.py still conflicts\. Resolve"):
        review.revert("t1")  # not resolved yet: refused, still nothing changed
    assert branch_commit(repo, "main") == later

    (work / "app.py").write_text("print('v3, without v2')\n")  # resolved by the user
    command = run_suggested(result.message, r"resolve them there and commit \((cd .*? && git commit)\)")
    assert command == f"cd {work} && git add -A && git commit"
    landed = review.revert("t1")
    assert landed.status == "reverted" and landed.conflicts == []
    assert f"the revert resolved in {work} is on main (fast-forward" in landed.message
    assert "undoes 2 file(s)" in landed.message and "1 memory doc(s) deleted" in landed.message
    head = branch_commit(repo, "main")
    assert out(repo, "rev-parse", f"{head}^") == later and landed.commit == head
    assert (repo / "app.py").read_text() == "print('v3, without v2')\n" and not (repo / "extra.py").exists()
    message = out(repo, "log", "-1", "--format=%B")
    assert message.startswith('Revert "Ticket t1"') and "# Conflicts" not in message
    assert store.get_ticket("t1").status.value == "reverted" and store.latest_run("t1")["revert_commit"] == head
    assert memory.deleted == [("p", ["Ticket: t1 doc"])]
    assert not work.exists() and "middle-revert/t1" not in branches(repo, "")
    assert out(repo, "worktree", "list").count("\n") == 0  # only the user's own


def test_a_resolved_revert_after_main_moved_on_is_merged_in_or_says_how_to_bring_main_in(env):
    repo, store, wt, review, _ = env
    work = resolved_in_its_worktree(env)
    (repo / "app.py").write_text("print('v4')\n")  # main moves on, on the resolved line
    moved = commit_all(repo, "v4")
    waits = review.revert("t1")
    assert waits.conflicts == ["app.py"] and waits.worktree == str(work) and branch_commit(repo, "main") == moved
    assert "main moved on since the revert of ticket t1 was started" in waits.message
    found = re.search(r"\((cd \S+) && (git merge main), resolve, (git add -A && git commit)\)", waits.message)
    assert found, waits.message
    assert subprocess.run(f"{found.group(1)} && {found.group(2)}", shell=True, capture_output=True,
                          env={**os.environ, **USER}).returncode == 1  # git stops at the conflict
    (work / "app.py").write_text("print('v4, without v2')\n")
    run_suggested(f"({found.group(1)} && {found.group(3)})", r"\((.*)\)")
    landed = review.revert("t1")
    assert landed.status == "reverted" and "fast-forward" in landed.message
    assert (repo / "app.py").read_text() == "print('v4, without v2')\n"


def test_a_revert_resolved_where_main_moved_elsewhere_lands_as_a_merge_commit(env):
    repo, store, wt, review, _ = env
    resolved_in_its_worktree(env)
    (repo / "README.md").write_text("unrelated\n")
    moved = commit_all(repo, "unrelated")
    landed = review.revert("t1")
    assert landed.status == "reverted" and "merge commit" in landed.message
    head = branch_commit(repo, "main")
    assert out(repo, "rev-parse", f"{head}^1") == moved
    assert (repo / "README.md").read_text() == "unrelated\n"
    assert (repo / "app.py").read_text() == "print('v3, without v2')\n"


def test_a_revert_given_up_in_its_worktree_starts_again(env):
    repo, store, wt, review, _ = env
    merged_then_built_on(env)
    first = review.revert("t1")
    subprocess.run(["git", "-C", first.worktree, "cherry-pick", "--abort"], check=True, env={**os.environ, **USER})
    again = review.revert("t1")  # nothing was committed there: made afresh, with the markers
    assert again.conflicts == ["app.py"] and "<<<<<<<" in (Path(again.worktree) / "app.py").read_text()


def test_done_after_a_revert_made_by_hand_checks_it_and_forgets_the_ticket(env):
    """The issue's case: a revert by hand, then `middle revert` conflicts; --done finishes it."""
    repo, store, wt, review, memory = env
    merged_then_built_on(env)
    (repo / "app.py").write_text("print('v3, without v2')\n")  # undone by hand on main
    (repo / "extra.py").unlink()
    by_hand = commit_all(repo, "revert t1 by hand")
    result = review.revert("t1")
    assert result.conflicts == ["app.py"]
    assert "Undid it on main by hand already? `middle revert t1 --done`" in result.message
    done = review.revert("t1", done=True)
    assert done.status == "reverted" and done.commit is None
    assert ("undone by hand on main (checked: main keeps none of the lines it added, nor lacks all it "
            "removed, in the 2 file(s) it changed); removed the unfinished revert in") in done.message
    assert memory.deleted == [("p", ["Ticket: t1 doc"])] and store.get_ticket("t1").status.value == "reverted"
    assert branch_commit(repo, "main") == by_hand and not revert_dir(wt).exists()
    assert "middle-revert/t1" not in branches(repo, "")


def test_done_refuses_while_main_still_holds_the_change_unless_forced(env):
    repo, store, wt, review, memory = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n", "gone.py": ""}, doc="d1")
    review.merge("t1")
    with pytest.raises(TicketError, match=r"main still holds ticket t1's change: app.py \(still has "
                                          r"`print\('v2'\)`\)\. .*add --force .* Nothing was changed"):
        review.revert("t1", done=True)
    assert store.get_ticket("t1").status.value == "merged" and memory.deleted == []
    forced = review.revert("t1", done=True, force=True)
    assert (
        forced.status == "reverted" and "not checked, --force: main still holds part of it in app.py" in forced.message
    )
    assert (repo / "app.py").read_text() == "print('v2')\n"  # --done never touches the code


def test_done_keeps_edits_in_an_unfinished_revert_and_commits_not_on_main(env):
    repo, store, wt, review, _ = env
    merged_then_built_on(env)
    first = review.revert("t1")
    work = Path(first.worktree)
    (repo / "app.py").write_text("print('v3, without v2')\n")
    (repo / "extra.py").unlink()
    commit_all(repo, "revert t1 by hand")
    (work / "app.py").write_text("print('half resolved')\n")  # the user's edit in the revert
    with pytest.raises(
        GitError,
        match=r"was edited since middle made it and holds changes not committed "
        r"\(app.py, extra.py\), which --done would delete",
    ):
        review.revert("t1", done=True)
    assert (work / "app.py").read_text() == "print('half resolved')\n"
    run_suggested(first.message, r"commit \((cd .*? && git commit)\)")  # now a commit main lacks
    with pytest.raises(GitError, match="has commits that are not on main") as refused:
        review.revert("t1", done=True)
    run_suggested(str(refused.value), r"remove it first \((git -C .*)\)\. Nothing")
    assert not work.exists() and "middle-revert/t1" not in branches(repo, "")
    assert review.revert("t1", done=True).status == "reverted"


def test_done_with_force_deletes_an_unfinished_revert_with_edits(env):
    repo, store, wt, review, _ = env
    merged_then_built_on(env)
    work = Path(review.revert("t1").worktree)
    (work / "notes.txt").write_text("mine\n")
    (repo / "app.py").write_text("print('v3, without v2')\n")
    (repo / "extra.py").unlink()
    commit_all(repo, "revert t1 by hand")
    assert review.revert("t1", done=True, force=True).status == "reverted"
    assert not work.exists()


def test_done_is_refused_for_a_ticket_that_is_not_merged(env):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n"})
    with pytest.raises(TicketError, match=r"ticket 't1' is complete, not merged: --done marks a merged ticket"):
        review.revert("t1", done=True)
    assert store.get_ticket("t1").status.value == "complete"


def test_reverting_a_ticket_a_merged_ticket_depends_on_names_it_and_still_reverts(env):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"mul.py": "M = 1\n"})
    review.merge("t1")
    complete(store, wt, repo, "t2", {"div.py": "from mul import M\n"}, depends_on=["t1"])
    review.merge("t2")
    complete(store, wt, repo, "t3", {"pow.py": "P = 1\n"}, depends_on=["t1"])  # complete, not merged
    result = review.revert("t1")
    assert result.status == "reverted" and not (repo / "mul.py").exists()
    assert result.warnings == [
        "ticket t2 is merged and depends on t1: its code stays on main and may need "
        "t1's; revert it too if so (`middle revert t2`)"
    ]
    assert (repo / "div.py").exists() and store.get_ticket("t2").status.value == "merged"


def test_a_plain_revert_sees_an_exact_revert_made_by_hand(env):
    """`git revert` by hand, later work elsewhere: `revert` finds nothing left to undo and finishes."""
    repo, store, wt, review, memory = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n"}, doc="d1")
    review.merge("t1")
    subprocess.run(
        ["git", "-C", str(repo), "revert", "--no-edit", "HEAD"],
        check=True,
        capture_output=True,
        env={**os.environ, **USER},
    )
    (repo / "README.md").write_text("later\n")
    head = commit_all(repo, "later")
    result = review.revert("t1")
    assert result.status == "reverted" and "its changes are no longer in main, so no revert commit" in result.message
    assert branch_commit(repo, "main") == head and memory.deleted == [("p", ["d1"])]


def test_a_revert_that_landed_before_a_crash_is_not_made_again(env):
    """The revert is on main but the process died before marking the ticket: run again, it finds
    the recorded revert and finishes, with no second revert and no worktree to resolve."""
    repo, store, wt, review, memory = env
    resolved_in_its_worktree(env)
    landed = review.revert("t1")
    store.set_status("t1", "merged", "as if the process had died before marking it")
    again = review.revert("t1")
    assert again.status == "reverted" and again.conflicts == []
    assert f"its revert {landed.commit[:10]} is on main already" in again.message
    assert branch_commit(repo, "main") == landed.commit and not revert_dir(wt).exists()
