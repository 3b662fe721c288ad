"""The whole code-change flow with real git, the real `middle` CLI and the real Claude Code CLI on
the built-in fake model: parallel tickets on their own branches, review, merge, conflict, revert,
dependencies, and stopping a parallel batch (SIGTERM, kill -9) then resuming each ticket once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from e2e_helpers import config, decide, done, fresh_project, orchestrator, plan, worktree, write_file

from orchestrator.workspace.git import branch_commit, out
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

MIDDLE = str(Path(sys.executable).with_name("middle"))


def create(tid: str, path: str, body: str, extra: str = "") -> tuple[str, str]:
    """A ticket the built-in demo model can do: create one file with the given content."""
    return (f"{tid}.md", f"---\ntitle: Create {path}\nproject: calc\nid: {tid}\n{extra}---\n"
                         f"Create `{path}` with:\n```python\n{body}```\n")


def setup(tmp_path: Path, claude_cli: str, tickets: list[tuple[str, str]], run: str = "") -> Path:
    repo = fresh_project(tmp_path, dict(tickets))
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[memory]\nsave_dir = "mem"\nbackend = "bm25"\n'
        f'[coding_agent.options]\ncli_path = "{claude_cli}"\nturn_timeout_s = 120\n{run}')
    return repo


def middle(tmp_path: Path, *args: str, env: dict[str, str] | None = None, ok: bool = True):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    result = subprocess.run([MIDDLE, *args], cwd=tmp_path, env={**base, **(env or {})}, text=True,
                            capture_output=True, timeout=300)
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    if ok:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def snapshot(repo: Path) -> dict:
    files = {str(p.relative_to(repo)): p.read_bytes() for p in repo.rglob("*")
             if p.is_file() and ".git" not in p.parts}
    return {"refs": out(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/main"),
            "status": out(repo, "status", "--porcelain"), "files": files}


def test_parallel_tickets_then_diff_merge_and_revert(tmp_path, claude_cli):
    repo = setup(tmp_path, claude_cli, [create("t1", "calc/one.py", "ONE = 1\n"),
                                        create("t2", "calc/two.py", "TWO = 2\n")])
    base = branch_commit(repo, "main")
    result = middle(tmp_path, "run", "--fake", "--parallel", "2")
    lines = result.stdout.splitlines()
    assert any(line.startswith("[t1] ") for line in lines) and any(line.startswith("[t2] ") for line in lines)
    assert lines[-1].startswith("2 ticket(s): 2 complete, 0 failed")
    # the fake model's costs are made up: said as such, never as dollars spent
    assert lines[-1].endswith("turn(s), offline model, no cost") and "$" not in result.stdout
    # each branch holds its own change; the user's working tree and branch are untouched
    assert out(repo, "show", "middle/t1:calc/one.py") == "ONE = 1"
    assert out(repo, "show", "middle/t2:calc/two.py") == "TWO = 2"
    assert out(repo, "show", "--stat", "--format=%s", "middle/t1").startswith("Create calc/one.py")
    assert branch_commit(repo, "main") == base and out(repo, "status", "--porcelain") == ""
    assert not (repo / "calc" / "one.py").exists() and not (repo / "calc" / "two.py").exists()

    diff = middle(tmp_path, "diff", "t1").stdout
    assert "+++ b/calc/one.py" in diff and "+ONE = 1" in diff
    assert "calc/one.py | 1 +" in middle(tmp_path, "diff", "t1", "--stat").stdout
    log = middle(tmp_path, "log", "t1").stdout
    assert "branch middle/t1 from main" in log and "calc/one.py (+1 -0)" in log
    assert "offline model, no cost" in log and "$" not in log

    assert "fast-forward" in middle(tmp_path, "merge", "t1").stdout
    assert "merge commit" in middle(tmp_path, "merge", "t2").stdout  # main moved: a merge commit
    assert (repo / "calc" / "one.py").read_text() == "ONE = 1\n" and (repo / "calc" / "two.py").exists()
    assert out(repo, "status", "--porcelain") == ""
    assert not worktree(tmp_path, "t1").exists()  # removed after the merge

    reverted = middle(tmp_path, "revert", "t1").stdout
    assert "revert commit" in reverted and "1 memory doc(s) deleted" in reverted
    assert not (repo / "calc" / "one.py").exists() and (repo / "calc" / "two.py").exists()
    assert out(repo, "log", "-1", "--format=%s").startswith('Revert "Create calc/one.py"')
    tickets = middle(tmp_path, "tickets").stdout
    assert "reverted" in tickets and "merged" in tickets
    assert "nothing to collect" in middle(tmp_path, "gc").stdout


def test_a_conflicting_merge_leaves_the_base_branch_and_working_tree_as_they_were(tmp_path, claude_cli):
    repo = setup(tmp_path, claude_cli, [create("t1", "calc/same.py", "X = 'first'\n"),
                                        create("t2", "calc/same.py", "X = 'second'\n")],
                 run="[run]\nparallel = 2\n")
    middle(tmp_path, "run", "--fake")
    middle(tmp_path, "merge", "t1")
    (repo / "notes.txt").write_text("the user's own uncommitted note\n")
    before = snapshot(repo)
    result = middle(tmp_path, "merge", "t2", ok=False)
    assert result.returncode == 1 and "conflict" in result.stdout and "calc/same.py" in result.stdout
    assert snapshot(repo) == before
    assert "conflict" in middle(tmp_path, "tickets", "--status", "conflict").stdout
    # discarding it removes its branch; the base branch still has t1's version
    middle(tmp_path, "discard", "t2")
    assert branch_commit(repo, "middle/t2") is None and (repo / "calc" / "same.py").read_text() == "X = 'first'\n"


def test_a_dependency_waits_for_the_merge_then_starts_from_the_merged_base(tmp_path, claude_cli):
    repo = setup(tmp_path, claude_cli, [create("t1", "calc/base.py", "BASE = 1\n"),
                                        create("t2", "calc/top.py", "from calc.base import BASE\n",
                                               extra="depends_on: [t1]\n")])
    listing = middle(tmp_path, "tickets").stdout
    assert "t1 to be merged" not in listing and "t1 (pending)" in listing
    first = middle(tmp_path, "run", "--fake")
    assert "complete ticket t1" in first.stdout
    assert "skipped ticket t2: ticket 't2' waits for t1 to be merged" in first.stdout
    assert "t1 to be merged" in middle(tmp_path, "tickets").stdout
    middle(tmp_path, "merge", "t1")
    second = middle(tmp_path, "run", "--fake")
    assert "complete ticket t2" in second.stdout
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        assert store.latest_run("t2")["base_commit"] == store.latest_run("t1")["merge_commit"]
    assert out(repo, "show", "middle/t2:calc/base.py") == "BASE = 1"


def test_unknown_dependencies_and_cycles_are_errors_and_the_rest_still_runs(tmp_path, claude_cli):
    setup(tmp_path, claude_cli, [create("a", "calc/a.py", "A = 1\n", extra="depends_on: [b]\n"),
                                 create("b", "calc/b.py", "B = 1\n", extra="depends_on: [a]\n"),
                                 create("c", "calc/c.py", "C = 1\n", extra="depends_on: nosuch\n"),
                                 create("d", "calc/d.py", "D = 1\n", extra="pth: ../elsewhere\n")])
    result = middle(tmp_path, "run", "--fake", ok=False)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert any("a.md" in e and "b.md" in e and "cycle" in e for e in errors), result.stderr
    assert any("c.md" in e and "'nosuch'" in e for e in errors), result.stderr
    assert "warning:" in result.stderr and "d.md" in result.stderr and "'pth'" in result.stderr
    assert "complete ticket d" in result.stdout


def _processes_in(path: Path) -> list[int]:
    """Live processes whose working directory is inside `path` (Claude Code runs in worktrees)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cwd = os.readlink(proc / "cwd")
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if cwd.startswith(str(path)) and state != "Z":
                found.append(int(proc.name))
    return found


def _stalled_batch(tmp_path, fake_api, claude_env, stop):
    """Two tickets running at once, each stalled inside its first Claude Code turn; `stop(proc)`
    stops the runner. Returns (proc, out, err) once it is gone."""
    fresh_project(tmp_path, {f"t{i}.md": f"---\ntitle: Slow {i}\nproject: calc\nid: t{i}\n---\nOne file.\n"
                             for i in (1, 2)})
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[run]\nparallel = 2\n'
        '[coding_agent.options]\nallowed_tools = ["Read", "Write", "Edit"]\n')
    entered, release = threading.Semaphore(0), threading.Event()

    def stall(body):
        entered.release()
        release.wait(120)
        return "never seen: the turn was stopped"

    fake_api.script.agent(plan("Create a.txt containing a."), plan("Create a.txt containing a."))
    fake_api.script.coding_agent(stall, stall)
    proc = subprocess.Popen([MIDDLE, "run"], cwd=tmp_path, env={**os.environ, **claude_env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for _ in range(2):
            assert entered.acquire(timeout=120), "both tickets never reached Claude Code"
        stop(proc)
        out_, err = proc.communicate(timeout=60)
    finally:
        release.set()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc, out_, err


def _resume_each_once(tmp_path, fake_api, claude_env):
    for tid in ("t1", "t2"):
        fake_api.script.coding_agent(write_file("a.txt", f"{tid}\n"), done("Created a.txt."))
        fake_api.script.agent(decide(True, "Created a.txt."))
        with orchestrator(config(tmp_path, memory=False), fake_api, claude_env) as orch:
            assert orch.resume(tid).status == "complete"
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        for tid in ("t1", "t2"):
            assert len(store.list_runs(tid)) == 1  # the same run continued, never a second one
            assert [t["status"] for t in store.list_turns(ticket_id=tid)] == ["done"]
            assert (worktree(tmp_path, tid) / "a.txt").read_text() == f"{tid}\n"
            assert store.get_claim(tid) is None


def test_sigterm_stops_a_parallel_batch_leaves_no_process_and_resume_finishes(tmp_path, fake_api, claude_env,
                                                                              claude_cli):
    proc, out_, err = _stalled_batch(tmp_path, fake_api, claude_env, lambda p: p.send_signal(signal.SIGTERM))
    assert proc.returncode == 130, (out_, err)
    assert "interrupted: middle resume t1" in err and "interrupted: middle resume t2" in err
    assert "Traceback" not in out_ + err
    time.sleep(0.5)
    assert _processes_in(tmp_path) == []  # Claude Code was stopped with the run, not orphaned
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        for tid in ("t1", "t2"):
            run = store.latest_run(tid)
            assert run["status"] == "interrupted" and "SIGTERM" in run["reason"]
            assert store.get_turn(run["id"], 1)["status"] == "interrupted"
            assert store.get_claim(tid) is None
    _resume_each_once(tmp_path, fake_api, claude_env)


def test_kill_9_of_a_parallel_runner_then_resume_finishes_each_ticket_once(tmp_path, fake_api, claude_env,
                                                                           claude_cli):
    def kill(p):
        os.killpg(p.pid, signal.SIGKILL)
        for pid in _processes_in(tmp_path):  # Claude Code runs in its own session: orphaned
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended between the listing and the kill
                pass

    proc, _, _ = _stalled_batch(tmp_path, fake_api, claude_env, kill)
    assert proc.returncode == -signal.SIGKILL
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        assert [store.get_ticket(t).status.value for t in ("t1", "t2")] == ["running", "running"]
    time.sleep(0.5)
    _resume_each_once(tmp_path, fake_api, claude_env)


def test_revert_of_a_ticket_that_merged_the_base_in_keeps_the_other_tickets_code(tmp_path, claude_cli):
    """Issue 20: tb resolved its conflict as told (git merge main, fix, commit), merged by
    fast-forward; diff, merge and revert agree that its change is x.py alone."""
    repo = setup(tmp_path, claude_cli, [create("ta", "x.py", "X = 'a'\n"), create("tb", "x.py", "X = 'b'\n"),
                                        create("tc", "c.py", "C = 1\n")])
    middle(tmp_path, "run", "--fake", "--parallel", "3")
    middle(tmp_path, "merge", "tc")
    middle(tmp_path, "merge", "ta")
    conflict = middle(tmp_path, "merge", "tb", ok=False)
    assert conflict.returncode == 1 and "git merge main" in conflict.stdout
    work = worktree(tmp_path, "tb")
    who = ["-c", "user.name=u", "-c", "user.email=u@example.com"]
    assert subprocess.run(["git", *who, "merge", "main"], cwd=work, capture_output=True).returncode != 0
    (work / "x.py").write_text("X = 'a and b'\n")
    subprocess.run(["git", *who, "commit", "-qam", "merge main, keep both"], cwd=work, check=True)
    stat = middle(tmp_path, "diff", "tb", "--stat").stdout
    assert "x.py" in stat and "c.py" not in stat
    assert "fast-forward" in middle(tmp_path, "merge", "tb").stdout
    assert (repo / "x.py").read_text() == "X = 'a and b'\n"
    reverted = middle(tmp_path, "revert", "tb").stdout
    assert "undoes 1 file(s)" in reverted
    assert (repo / "c.py").read_text() == "C = 1\n" and (repo / "x.py").read_text() == "X = 'a'\n"
    assert out(repo, "status", "--porcelain") == ""
    assert "c.py" in middle(tmp_path, "diff", "tc", "--stat").stdout  # tc is still merged, its code there
    # gc keeps what it cannot account for, says so and how to remove it; --force removes it
    leftover = tmp_path / "state" / "worktrees" / "tb"
    subprocess.run(["git", "worktree", "add", "-q", "-b", "middle/tb", str(leftover), "main"], cwd=repo, check=True)
    (leftover / "draft.py").write_text("unsaved = True\n")
    subprocess.run(["git", "branch", "middle/mine"], cwd=repo, check=True)
    kept = " ".join(middle(tmp_path, "gc").stdout.split())
    assert "kept worktree" in kept and "draft.py" in kept and "kept branch" in kept and "middle/mine" in kept
    assert "--force" in kept and (leftover / "draft.py").exists()
    forced = " ".join(middle(tmp_path, "gc", "--force").stdout.split())
    assert "removed worktree" in forced and "removed branch" in forced and not leftover.exists()
    assert out(repo, "branch", "--list", "middle/*") == ""
