"""kill -9 of `middle revert` and `middle discard` between deleting the ticket's memory docs and
recording it (orchestrator.killpoints: forget.deleted, forget.marked), then the same command
again: a real `middle` process each time (the offline model, Claude Code on the fake Messages
API), a real git repository, SQLite store and bm25 memory. Nothing is left: the ticket ends
reverted (or discarded), its docs out of memory and marked deleted, one revert commit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.killpoints import VARIABLE
from orchestrator.testing import make_repo
from orchestrator.workspace.git import out
from tickets.store import TicketStore

TICKET = ("---\ntitle: Create same.py\nproject: calc\nid: t1\n---\n"
          "Create `calc/same.py` with:\n```python\nX = 1\n```\n")


def middle(root: Path, *args: str, kill_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    if kill_at:
        env[VARIABLE] = kill_at
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=180)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    if kill_at:
        assert proc.returncode == -9, f"`middle {' '.join(args)}` never passed {kill_at}: {proc.stderr}"
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture
def completed(tmp_path: Path, claude_cli: str) -> Path:
    """Ticket t1 complete on its branch, its summary indexed in the project's bm25 memory."""
    make_repo(tmp_path / "repo", {"app.py": "print('v1')\n"})
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "t1.md").write_text(TICKET)
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[memory]\nsave_dir = "mem"\nbackend = "bm25"\n')
    middle(tmp_path, "run", "--fake", "t1")
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        assert len(store.memory_docs("t1")) == 1
    assert in_memory(tmp_path) == 1
    return tmp_path


def in_memory(root: Path) -> int:
    """How many of t1's docs the project's memory holds (`middle memory list`)."""
    listing = middle(root, "memory", "list", "--project", "calc").stdout
    return listing.count("Create same.py")


def state(root: Path) -> tuple[str, list[str], list[str]]:
    with TicketStore(root / "state" / "middle.sqlite3") as store:
        return (store.get_ticket("t1").status.value, store.memory_docs("t1"),
                store.memory_docs("t1", include_deleted=True))


@pytest.mark.parametrize("at", ["forget.deleted:1", pytest.param("forget.marked:1", marks=pytest.mark.killsweep)])
def test_a_revert_killed_after_deleting_the_memory_docs_is_finished_by_the_same_revert(completed, at):
    root = completed
    middle(root, "merge", "t1")
    middle(root, "revert", "t1", kill_at=at)
    assert state(root)[0] == "merged" and in_memory(root) == 0  # the docs are gone, the ticket not marked
    said = middle(root, "revert", "t1").stdout
    assert "reverted ticket t1" in " ".join(said.split())
    status, live, ever = state(root)
    assert status == "reverted" and live == [] and len(ever) == 1
    assert in_memory(root) == 0
    log = out(root / "repo", "log", "--format=%s", "main").splitlines()
    assert sum(line.startswith("Revert") for line in log) == 1  # one revert commit
    assert not (root / "repo" / "calc" / "same.py").exists()


def test_a_revert_of_a_failed_round_killed_after_marking_its_docs_is_finished_not_refused(completed):
    """A ticket that failed in a later round keeps its earlier round's doc, so `middle revert`
    discards it and deletes the doc. Killed after the docs were marked deleted, the same revert
    found no live doc and refused ("never merged or indexed, so there is nothing to revert"):
    the ticket stayed failed with its worktree and branch already removed."""
    root = completed
    with TicketStore(root / "state" / "middle.sqlite3") as store:  # (what a failed round leaves)
        store.set_status("t1", "failed", "round 2 gave up")
    middle(root, "revert", "t1", kill_at="forget.marked:1")
    assert state(root)[:2] == ("failed", [])
    said = " ".join(middle(root, "revert", "t1").stdout.split())
    assert "discarded ticket t1" in said and "its 1 were deleted already" in said, said
    status, live, ever = state(root)
    assert status == "discarded" and live == [] and len(ever) == 1
    assert in_memory(root) == 0
    assert not out(root / "repo", "branch", "--list", "middle/t1")


@pytest.mark.killsweep
def test_a_discard_killed_after_deleting_the_memory_docs_is_finished_by_the_same_discard(completed):
    root = completed
    middle(root, "discard", "t1", kill_at="forget.deleted:1")
    assert state(root)[0] == "complete" and in_memory(root) == 0
    said = " ".join(middle(root, "discard", "t1").stdout.split())
    assert "discarded ticket t1" in said and "in no store" in said, said  # gone already: said so
    status, live, _ = state(root)
    assert status == "discarded" and live == []
