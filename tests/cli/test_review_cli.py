"""`middle revert` and `middle discard` as real processes in a project: a revert that conflicts
exits 1 with the worktree and the commands to finish it (which work as printed), `--done`,
the warning about a merged ticket that depends on the reverted one, and discard's refusal to
delete files git does not track (one `error:` line) unless --force."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.config.settings import load_config
from orchestrator.services import Services
from orchestrator.testing import make_repo
from orchestrator.testing.git import commit_all
from orchestrator.workspace.git import branch_commit
from tickets.source import load_tickets

USER = {"GIT_AUTHOR_NAME": "User", "GIT_AUTHOR_EMAIL": "user@example.com", "GIT_COMMITTER_NAME": "User",
        "GIT_COMMITTER_EMAIL": "user@example.com", "GIT_EDITOR": "true"}


def middle(root: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_CONFIG", "MEMORY_"))}
    out = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", *args], cwd=root, env=env,
                         capture_output=True, text=True, timeout=120)
    assert "Traceback" not in out.stdout + out.stderr, out.stderr
    assert out.returncode == code, (out.stdout, out.stderr)
    return out


def one_error_line(result: subprocess.CompletedProcess, *needles: str) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def project(tmp_path):
    make_repo(tmp_path / "repo", {"app.py": "print('v1')\n"})
    (tmp_path / "tickets").mkdir()
    for tid, extra in (("t1", ""), ("t2", "depends_on: [t1]\n")):
        (tmp_path / "tickets" / f"{tid}.md").write_text(
            f"---\ntitle: Ticket {tid}\nproject: demo\n{extra}---\nDo it.\n")
    (tmp_path / "middle.toml").write_text('[project]\nid = "demo"\npath = "repo"\n')
    return tmp_path


def complete(root: Path, tid: str, files: dict[str, str]) -> Path:
    """The ticket ran and completed with `files` on its branch (what the graph does, no model)."""
    with Services(load_config(root / "middle.toml", environ={})) as svc:
        for t in load_tickets(root / "tickets", root / "repo").tickets:
            if not svc.store.has_ticket(t.id):
                svc.store.upsert_ticket(t)
        run_id = svc.store.claim_new_run(tid, ["pending"])
        assert run_id is not None
        ws = svc.review.worktrees.prepare(tid, root / "repo")
        svc.store.set_run_fields(run_id, isolation="worktree", repo=ws.repo, base_branch=ws.base_branch,
                                 base_commit=ws.base_commit, branch=ws.branch, worktree=ws.path)
        for rel, text in files.items():
            (Path(ws.path) / rel).write_text(text)
        sha, changes = svc.review.worktrees.commit(ws, f"Ticket {tid}\n")
        svc.store.set_run_fields(run_id, head_commit=sha, changes=changes)
        assert svc.store.end_run(tid, run_id, "complete", None)
        return Path(ws.path)


def test_a_revert_that_conflicts_exits_1_and_its_printed_commands_finish_it(project):
    repo = project / "repo"
    complete(project, "t1", {"app.py": "print('v2')\n"})
    middle(project, "merge", "t1")
    (repo / "app.py").write_text("print('v3, built on v2')\n")
    later = commit_all(repo, "later work")
    result = middle(project, "revert", "t1", code=1)
    assert result.stdout.startswith("conflict: cannot revert ticket t1 cleanly: later changes on main touch "
                                    "app.py") and result.stdout.count("\n") == 1
    assert branch_commit(repo, "main") == later
    again = middle(project, "revert", "t1", code=1)
    one_error_line(again, "is not finished: app.py still conflicts", "Nothing was changed")
    command = re.search(r"resolve them there and commit \((cd .*? && git commit)\)", result.stdout).group(1)
    work = Path(command.split()[1])
    (work / "app.py").write_text("print('v3, without v2')\n")
    subprocess.run(command, shell=True, check=True, env={**os.environ, **USER}, capture_output=True)
    landed = middle(project, "revert", "t1")
    assert landed.stdout.startswith("reverted: reverted ticket t1: the revert resolved in")
    assert (repo / "app.py").read_text() == "print('v3, without v2')\n"
    assert "t1" in middle(project, "tickets").stdout and "reverted" in middle(project, "tickets").stdout


def test_revert_done_checks_main_and_warns_about_a_merged_dependent(project):
    repo = project / "repo"
    complete(project, "t1", {"app.py": "print('v2')\n"})
    middle(project, "merge", "t1")
    complete(project, "t2", {"more.py": "M = 1\n"})
    middle(project, "merge", "t2")
    one_error_line(middle(project, "revert", "t1", "--done", code=1),
                   "main still holds ticket t1's change: app.py (still has `print('v2')`)", "--force")
    (repo / "app.py").write_text("print('v1')\n")
    commit_all(repo, "undone by hand")
    done = middle(project, "revert", "t1", "--done")
    assert done.stdout.startswith("reverted: reverted ticket t1: undone by hand on main (checked:")
    assert done.stderr.strip() == ("warning: ticket t2 is merged and depends on t1: its code stays on main and "
                                   "may need t1's; revert it too if so (`middle revert t2`)")


def test_discard_refuses_untracked_files_in_one_line_unless_forced(project):
    work = complete(project, "t1", {"app.py": "print('v2')\n"})
    (work / "notes.txt").write_text("mine\n")
    for args in (("discard", "t1"), ("revert", "t1")):
        one_error_line(middle(project, *args, code=1), "holds files git does not track (notes.txt)",
                       "`middle discard t1 --force`")
    assert (work / "notes.txt").exists()
    one_error_line(middle(project, "revert", "t1", "--done", code=1), "is complete, not merged")
    forced = middle(project, "discard", "t1", "--force")
    assert "and 1 untracked file(s) in it (--force)" in forced.stdout and not work.exists()
