"""kill -9 of `middle merge` / `middle revert` just after the base branch moved, before the
ticket was marked (orchestrator.killpoints: base.advanced), with real git and a real SQLite
store: the same command again finishes it, and the ticket's step on the base branch is the one
the merge made (so a later revert undoes it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from review_helpers import complete

from orchestrator.errors import TicketError
from orchestrator.killpoints import VARIABLE
from orchestrator.workspace.git import out

KILLED = r"""
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from review_helpers import Memory
from orchestrator.workspace import Review, Worktrees
from tickets.store import TicketStore
store = TicketStore(Path({root!r}) / "state" / "middle.sqlite3")
getattr(Review(store, Worktrees(Path({root!r}) / "state" / "worktrees"), Memory()), {verb!r})("t1", **{how!r})
"""


def killed(tmp_path: Path, verb: str, **how: str) -> None:
    script = KILLED.format(tests=str(Path(__file__).parent), root=str(tmp_path), verb=verb, how=how)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, VARIABLE: "base.advanced:1"})
    assert proc.returncode == -9, proc.stderr[-2000:]


@pytest.mark.parametrize("fast_forward", [True, pytest.param(False, marks=pytest.mark.killsweep)])
def test_a_merge_killed_after_the_base_moved_is_finished_and_its_revert_undoes_it(env, tmp_path, fast_forward):
    """Before, the merge run again found the ticket's commits on the base already and recorded
    an empty step (base before = base after): `middle revert` then made no revert commit and the
    ticket's code stayed."""
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n"})
    if not fast_forward:  # the base moved since the ticket started: a merge commit
        (repo / "other.py").write_text("O = 1\n")
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=U", "-c", "user.email=u@e", "commit", "-qm",
                        "other"], check=True)
    killed(tmp_path, "merge")
    assert out(repo, "show", "main:app.py") == "print('v2')"  # on the base, not marked merged
    assert store.get_ticket("t1").status.value == "complete"
    assert review.merge("t1").status == "merged"
    run = store.latest_run("t1")
    assert run is not None and run["premerge_commit"] != run["merge_commit"]
    assert review.revert("t1").status == "reverted"
    assert out(repo, "show", "main:app.py") == "print('v1')"  # the revert undid it


def test_a_revert_killed_after_the_base_moved_makes_no_second_revert_commit_and_records_it(env, tmp_path):
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n"})
    review.merge("t1")
    killed(tmp_path, "revert")
    reverted = out(repo, "rev-parse", "main")
    assert out(repo, "show", "main:app.py") == "print('v1')"
    assert review.revert("t1").status == "reverted"
    assert out(repo, "rev-parse", "main") == reverted  # no second commit
    assert store.get_ticket("t1").status.value == "reverted"
    run = store.latest_run("t1")
    assert run is not None and run["revert_commit"] == reverted  # found by its message, recorded


def test_a_merge_despite_its_check_killed_after_the_base_moved_records_the_person_and_merges_once(
        env, tmp_path):
    """`middle merge ID --despite-check "why"` of a ticket whose check failed (its work kept), killed
    once the base moved: the same command again records who and why once (the note is found,
    not written twice), finds its step on the base and marks the ticket merged, making no second
    merge commit; a plain `middle merge` meanwhile is still refused (the ticket failed)."""
    repo, store, wt, review, _ = env
    complete(store, wt, repo, "t1", {"app.py": "print('v2')\n"}, status="failed")
    (repo / "other.py").write_text("O = 1\n")  # the base moved since: a merge commit
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=U", "-c", "user.email=u@e", "commit", "-qm", "other"],
                   check=True)
    killed(tmp_path, "merge", despite_check="the failing test is flaky", by="ana")
    moved = out(repo, "rev-parse", "main")
    assert out(repo, "show", "main:app.py") == "print('v2')" and store.get_ticket("t1").status.value == "failed"
    with pytest.raises(TicketError, match="only a complete ticket can be merged"):
        review.merge("t1")
    done = review.merge("t1", despite_check="the failing test is flaky", by="ana")
    assert done.status == "merged" and "despite its failing check (by ana: the failing test is flaky)" in done.message
    assert out(repo, "rev-parse", "main") == moved  # no second merge commit
    run = store.latest_run("t1")
    assert run is not None and (run["premerge_commit"], run["merge_commit"]) != (moved, moved)
    notes = [e["data"]["check_overridden"] for e in store.list_events(run_id=run["id"], limit=1000)
             if e["kind"] == "note" and "check_overridden" in e["data"]]
    assert notes == [{"by": "ana", "reason": "the failing test is flaky"}]
    assert "despite its failing check (by ana" in (store.get_ticket("t1").status_reason or "")
