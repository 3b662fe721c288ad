"""The check loop with the real `middle` CLI and the real Claude Code CLI on the built-in fake model:
a check that fails goes back to the middle agent, whose next prompt fixes it; a `kill -9` during a
check, then `middle resume`, runs the check again and commits once; a `middle worker` on
PostgreSQL runs the check in its clone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.testing.check_project import TICKET, check_loop_project
from orchestrator.workspace.git import git, out
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

MIDDLE = str(Path(sys.executable).with_name("middle"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}


def middle(root: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([MIDDLE, *args], cwd=root, env=_env(), text=True, capture_output=True, timeout=300)
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    if ok:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def project(root: Path, check: str, extra: str = "") -> Path:
    check_loop_project(root, EXAMPLES / "sample-repo")
    (root / "middle.toml").write_text(
        f'[project]\npath = "repo"\n[memory]\nbackend = "none"\n[check]\ncommands = {json.dumps([check])}\n'
        '[coding_agent.options]\nallowed_tools = ["Read", "Write", "Edit"]\nturn_timeout_s = 120\n' + extra)
    return root / "repo"


def test_a_failed_check_is_fed_back_and_the_next_turn_fixes_it(tmp_path, claude_cli):
    repo = project(tmp_path, "python check_fix.py")
    result = middle(tmp_path, "run", "--fake")
    assert "back to the middle agent (correction 1 of at most 3)" in result.stdout
    assert "complete ticket t1: 2 turn(s), offline model, no cost, 1 correction(s)" in result.stdout
    assert out(repo, "show", "middle/t1:calc/fix.py") == "FIXED = True"
    tickets = middle(tmp_path, "tickets").stdout
    assert "passed (1 correction)" in tickets
    log = middle(tmp_path, "log", "t1").stdout
    assert "base check `python check_fix.py`: passed (exit 0" in log
    assert "check `python check_fix.py`: failed (exit 1" in log and "calc/other.py needs calc/fix.py" in log
    assert "check `python check_fix.py`: passed (exit 0" in log and "check passed, 1 correction(s)" in log


def test_a_base_that_already_fails_a_test_is_shown_no_worse_with_its_name(tmp_path, claude_cli):
    known = "def test_bug():\n    assert 1 == 2, 'a bug the project already has'\n\n\ndef test_fine():\n    pass\n"
    root = tmp_path
    shutil.copytree(EXAMPLES / "sample-repo", root / "sample")
    (root / "sample" / "test_known.py").write_text(known)
    check_loop_project(root, root / "sample", check_file=False)
    check = f"{sys.executable} -m pytest -q -p no:cacheprovider test_known.py"
    (root / "middle.toml").write_text(
        f'[project]\npath = "repo"\n[memory]\nbackend = "none"\n[check]\ncommands = {json.dumps([check])}\n'
        '[coding_agent.options]\nallowed_tools = ["Read", "Write", "Edit"]\nturn_timeout_s = 120\n')
    result = middle(root, "run", "--fake")
    assert "already fails on the base commit (1 already failing on the base: test_known.py::test_bug)" in \
        result.stdout
    assert "complete ticket t1" in result.stdout
    tickets = middle(root, "tickets").stdout
    assert "no worse (1 already failing" in tickets and "passed" not in tickets
    log = middle(root, "log", "t1").stdout
    assert "no worse (1 already failing on the base: test_known.py::test_bug)" in log
    assert "2 test(s) run" in log


def test_kill_9_during_a_check_then_resume_runs_it_again_and_commits_once(tmp_path, claude_cli):
    started, release = tmp_path / "check-started", tmp_path / "release"
    # The first run (the base check) writes "0" and passes at once; every later one writes "1"
    # and holds until `release` exists (so the base check does not wait out the hold).
    slow_check = (f"{sys.executable} -c \"import pathlib, time; p = pathlib.Path('{started}'); "
                  f"again = p.exists(); p.write_text(str(int(again))); [time.sleep(0.1) for _ in range(600) "
                  f"if again and not pathlib.Path('{release}').exists()]\"")
    repo = project(tmp_path, slow_check)
    proc = subprocess.Popen([MIDDLE, "run", "--fake"], cwd=tmp_path, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        # The base check writes "0", the final check "1": kill during the final one.
        while not (started.exists() and started.read_text() == "1") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists() and started.read_text() == "1", "the final check never started"
        os.kill(proc.pid, signal.SIGKILL)  # the process only: its check dies with it or is stopped later
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    release.write_text("go")
    resumed = middle(tmp_path, "resume", "t1", "--fake")
    assert "complete ticket t1" in resumed.stdout, resumed.stdout
    with TicketStore(tmp_path / ".middle" / "middle.sqlite3") as store:
        run = store.latest_run("t1")
        assert len(store.list_runs("t1")) == 1 and run["check_status"] == "passed"
        turns = store.list_turns(run_id=run["id"])
        assert [t["turn_no"] for t in turns] == [1]  # the finished turn did not run again
        finals = [
            e for e in store.list_events(run_id=run["id"]) if e["kind"] == "check" and e["data"]["phase"] == "check"
        ]
        assert finals and finals[-1]["data"]["exit_code"] == 0
    assert len(out(repo, "log", "--format=%s", "main..middle/t1").splitlines()) == 1  # committed once
    leftover = subprocess.run(["pgrep", "-f", str(started)], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", "a check process outlived its run"


@pytest.mark.postgres
def test_a_worker_on_postgresql_runs_the_check_in_its_clone(tmp_path, claude_cli, pg_url):
    seed = project(tmp_path / "seed-project", "python check_fix.py")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(remote))
    desk = tmp_path / "desk"
    git(tmp_path, "clone", "--quiet", str(remote), str(desk))
    (desk / "tickets").mkdir()
    (desk / "tickets" / "t1.md").write_text(TICKET)
    config = (
        f'[store]\nurl = "{pg_url}"\n[project]\npath = "."\nrepo_url = "{remote}"\nbase_branch = "main"\n'
        '[memory]\nbackend = "none"\n[check]\ncommands = ["python check_fix.py"]\n'
        f'[coding_agent.options]\ncli_path = "{claude_cli}"\nturn_timeout_s = 120\n'
    )
    (desk / "middle.toml").write_text(config)
    middle(desk, "sync")
    worker_home = tmp_path / "w0"
    worker_home.mkdir()
    (worker_home / "middle.toml").write_text(config)
    done = middle(worker_home, "worker", "--fake", "--once")
    assert "complete ticket t1" in done.stdout and "1 correction(s)" in done.stdout, done.stdout
    assert out(remote, "show", "middle/t1:calc/fix.py") == "FIXED = True"
    with TicketStore(pg_url) as store:
        run = store.latest_run("t1")
        assert (run["check_status"], run["corrections"]) == ("passed", 1)
        assert store.check_baseline(run["base_commit"], "python check_fix.py")["exit_code"] == 0


def test_a_check_command_that_is_not_found_is_one_error_and_the_ticket_runs_once_it_is_fixed(tmp_path, claude_cli):
    """A wrong `[check] commands` is the user's config mistake, not a failed ticket: `middle run ID`
    says it in one `error:` line naming the command and what to fix, exits non-zero, and leaves
    the ticket pending, so the same command runs it once the config is fixed."""
    project(tmp_path, "no-such-checker --all")
    result = middle(tmp_path, "run", "t1", "--fake", ok=False)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and result.stderr.strip() == errors[0], result.stderr
    assert "check `no-such-checker --all` cannot run on the base commit" in errors[0] and "not found" in errors[0]
    assert "fix [check] commands in the config" in errors[0] and "then `middle run t1 --fake`" in errors[0]
    assert "failed ticket" not in result.stdout and "0 failed" in result.stdout, result.stdout
    assert " pending " in middle(tmp_path, "tickets").stdout
    config = tmp_path / "middle.toml"
    config.write_text(config.read_text().replace("no-such-checker --all", "python -c pass"))
    again = middle(tmp_path, "run", "t1", "--fake")
    assert "complete ticket t1: 1 turn(s)" in again.stdout, again.stdout


def test_a_person_merges_a_ticket_whose_check_still_fails_on_their_judgement_recorded(tmp_path, claude_cli):
    """The gate's way out that keeps the work: a ticket that failed on its check (its work committed
    on its branch) is merged with `--despite-check REASON`, the person (git's user, as a memory
    change records) and the reason recorded; without a reason it is refused, nothing moved."""
    from orchestrator.memory.curation import cli_user

    repo = project(tmp_path, "python check_fix.py")
    (tmp_path / "middle.toml").write_text((tmp_path / "middle.toml").read_text().replace(
        "[check]\n", "[check]\nmax_rounds = 0\n"))
    result = middle(tmp_path, "run", "--fake", ok=False)
    assert "failed ticket t1" in result.stdout and result.returncode == 1
    refused = middle(tmp_path, "merge", "t1", ok=False)
    assert refused.returncode == 1 and "--despite-check" in refused.stderr and "error:" in refused.stderr
    empty = middle(tmp_path, "merge", "t1", "--despite-check", " ", ok=False)
    assert empty.returncode == 1 and "needs your reason" in empty.stderr
    assert "calc/other.py" not in out(repo, "ls-tree", "--name-only", "-r", "main")  # nothing moved
    merged = middle(tmp_path, "merge", "t1", "--despite-check", "check_fix.py is wrong here")
    who = cli_user(tmp_path)
    assert f"despite its failing check (by {who}: check_fix.py is wrong here)" in merged.stdout
    assert out(repo, "show", "main:calc/other.py") == "OTHER = 1"  # the ticket's work, as committed
    assert "merge it as it is with `middle merge t1 --despite-check \"your reason\"`" in result.stdout
    log = middle(tmp_path, "log", "t1").stdout
    assert f"merged into main at {out(repo, 'rev-parse', 'main')[:10]} despite its failing check (by {who}: " \
           "check_fix.py is wrong here)" in log
    events = TicketStore(tmp_path / ".middle" / "middle.sqlite3").list_events(ticket_id="t1")
    assert [e["data"]["check_overridden"] for e in events if "check_overridden" in e["data"]] == [
        {"by": who, "reason": "check_fix.py is wrong here"}]
    again = middle(tmp_path, "merge", "t1", "--despite-check", "check_fix.py is wrong here")
    assert "already merged" in again.stdout
