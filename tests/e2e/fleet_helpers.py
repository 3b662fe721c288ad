"""The fleet tests' helpers (test_fleet.py, test_fleet_failures.py): a bare repository standing
for the shared remote, a developer's clone that files the tickets, `middle worker` processes each
in a folder of its own, all on one PostgreSQL store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.testing import make_repo
from orchestrator.workspace.git import git, out
from tickets.claims import claim_is_live
from tickets.store import TicketStore

MIDDLE = str(Path(sys.executable).with_name("middle"))


def fleet_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}


def ticket_text(i: int, deps: list[int]) -> str:
    dep_line = f"depends_on: [{', '.join(f't{d:02d}' for d in deps)}]\n" if deps else ""
    return (f"---\ntitle: Module {i}\nproject: calc\nid: t{i:02d}\n{dep_line}---\n"
            f"Create `calc/m{i:02d}.py` with:\n```python\nVALUE = {i}\n```\n")


def fleet(tmp_path: Path, claude_cli: str, pg_url: str, tickets: dict[int, list[int]], *,
          lease_s: float = 120.0, store_extra: str = "", dependencies: str = "complete") -> tuple[Path, Path]:
    """A bare remote, a filing machine that syncs the tickets, and the config workers share."""
    seed = make_repo(tmp_path / "seed", {"calc/__init__.py": "", "README.md": "calc\n"})
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(remote))
    desk = tmp_path / "desk"  # a developer's clone: tickets are filed and reviewed here
    git(tmp_path, "clone", "--quiet", str(remote), str(desk))
    (desk / "tickets").mkdir(parents=True)
    for i, deps in tickets.items():
        (desk / "tickets" / f"t{i:02d}.md").write_text(ticket_text(i, deps))
    config = (
        f'[store]\nurl = "{pg_url}"\n{store_extra}[project]\npath = "."\nrepo_url = "{remote}"\nbase_branch = "main"\n'
        f'[run]\ndependencies = "{dependencies}"\nlease_s = {lease_s}\n'
        f'[coding_agent.options]\ncli_path = "{claude_cli}"\nturn_timeout_s = 120\n'
    )
    (desk / "middle.toml").write_text(config)
    subprocess.run([MIDDLE, "sync"], cwd=desk, env=fleet_env(), check=True, capture_output=True, text=True)
    return remote, desk


def start_worker(tmp_path: Path, desk: Path, name: str, *extra: str, host: str | None = None) -> subprocess.Popen:
    """A `middle worker` in its own folder; `host`: the machine it plays (MIDDLE_HOSTNAME)."""
    home = tmp_path / name
    home.mkdir(exist_ok=True)
    (home / "middle.toml").write_text((desk / "middle.toml").read_text())
    env = {**fleet_env(), "MIDDLE_HOSTNAME": host} if host else fleet_env()
    return subprocess.Popen(
        [MIDDLE, "worker", "--fake", *extra],
        cwd=home,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def chain_and_fan(n: int) -> dict[int, list[int]]:
    """t00..: every fourth ticket depends on the one before it, a few depend on two."""
    deps: dict[int, list[int]] = {}
    for i in range(n):
        deps[i] = [i - 1] if i % 4 == 3 else ([i - 2, i - 5] if i % 7 == 6 and i >= 5 else [])
    return deps


def check_all_ran_once_in_order(pg_url: str, remote: Path, tickets: dict[int, list[int]]) -> None:
    with TicketStore(pg_url) as store:
        runs = {}
        for i in tickets:
            tid = f"t{i:02d}"
            ticket_runs = store.list_runs(tid)
            assert [r["status"] for r in ticket_runs] == ["complete"], (
                tid,
                [(r["status"], r.get("reason"), store.run_end_data(r["id"])) for r in ticket_runs],
            )
            assert store.get_claim(tid) is None
            runs[tid] = ticket_runs[0]
        for i, deps in tickets.items():
            for d in deps:  # a dependent started after its dependency ended
                assert runs[f"t{i:02d}"]["started_at"] >= (runs[f"t{d:02d}"]["ended_at"] or "~"), (i, d)
    heads = out(remote, "for-each-ref", "--format=%(refname:short)", "refs/heads/middle")
    assert sorted(heads.split()) == sorted(f"middle/t{i:02d}" for i in tickets)
    for i, deps in tickets.items():  # each branch holds its own file and its dependencies'
        for j in [i, *deps]:
            assert out(remote, "show", f"middle/t{i:02d}:calc/m{j:02d}.py") == f"VALUE = {j}"


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

def pids_under(path: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if os.readlink(proc / "cwd").startswith(str(path)):
                    found.append(int(proc.name))
            except OSError:
                pass
    return found

def wait_lease_out(pg_url: str, ticket_id: str) -> None:
    """Until the ticket's claim has expired by the database's clock (or is gone)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with TicketStore(pg_url) as store:
            claim = store.get_claim(ticket_id)
        if claim is None or not claim_is_live(claim):
            return
        time.sleep(0.2)
    raise AssertionError(f"the dead machine's claim on {ticket_id} never ran out")


def wait_inside_a_turn(pg_url: str) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with TicketStore(pg_url) as store:
            for t in store.list_tickets(status="running"):
                run = store.latest_run(t.id)
                if run and store.list_turns(run_id=run["id"]):
                    return t.id
        time.sleep(0.05)
    raise AssertionError("the worker never started a turn")
