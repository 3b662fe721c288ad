"""`middle bench fleet`: `middle worker` processes on one PostgreSQL store, and claims under load.

- Throughput: for each worker count, a fresh database and bare remote, N one-turn tickets filed
  with `middle sync`, then that many `middle worker --once --fake` processes (each its own clone).
  Reported: tickets per minute, Claude Code's own time per ticket, the framework's time inside
  each run, and the coordination overhead per ticket (worker time spent outside any run: start-up,
  clone and fetch, claiming, waiting) = (sum of worker wall times - sum of run wall times) / N.
- Claims: P processes race to claim a backlog of pending tickets on one store, each claim attempt
  timed (a claim either wins the ticket or learns another process has it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import click

from orchestrator.bench.metrics import percentile
from orchestrator.errors import ConfigError


def _seconds(a: str, b: str | None) -> float:
    if b is None:  # still running (a bench reads ended runs only)
        return 0.0
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def _server(store_url: str | None) -> tuple[Any, Callable[[], str], Callable[[], None]]:
    """(server or None, make a fresh database URL, stop)."""
    from orchestrator.testing import postgres

    if store_url:
        return None, lambda: store_url, lambda: None
    why = postgres.available()
    if why:
        raise ConfigError(f"no PostgreSQL to measure on: {why}; or pass --store-url postgresql://...")
    server = postgres.start_server()
    return server, server.create_database, server.stop


def _fleet(root: Path, url: str, tickets: int, claude_cli: str | None) -> tuple[Path, Path]:
    from orchestrator.testing.git import make_repo
    from orchestrator.workspace.git import git

    seed = make_repo(root / "seed", {"calc/__init__.py": "", "README.md": "calc\n"})
    remote = root / "remote.git"
    git(root, "clone", "--quiet", "--bare", str(seed), str(remote))
    desk = root / "desk"
    git(root, "clone", "--quiet", str(remote), str(desk))
    (desk / "tickets").mkdir()
    for i in range(tickets):
        (desk / "tickets" / f"t{i:03d}.md").write_text(
            f"---\ntitle: Module {i}\nproject: calc\nid: t{i:03d}\n---\n"
            f"Create `calc/m{i:03d}.py` with:\n```python\nVALUE = {i}\n```\n")
    cli = f'cli_path = "{claude_cli}"\n' if claude_cli else ""
    (desk / "middle.toml").write_text(
        f'[store]\nurl = "{url}"\n[project]\npath = "."\nrepo_url = "{remote}"\nbase_branch = "main"\n'
        f'[coding_agent.options]\nturn_timeout_s = 300\n{cli}')
    return remote, desk


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}


def measure_workers(url: str, workers: int, tickets: int, claude_cli: str | None = None) -> dict[str, Any]:
    from tickets.store import TicketStore

    root = Path(tempfile.mkdtemp(prefix="middle-bench-fleet-"))
    try:
        _, desk = _fleet(root, url, tickets, claude_cli)
        middle = [sys.executable, "-m", "orchestrator.cli.main"]
        subprocess.run([*middle, "sync"], cwd=desk, env=_env(), check=True, capture_output=True)
        homes = []
        for k in range(workers):
            home = root / f"w{k}"
            home.mkdir()
            (home / "middle.toml").write_text((desk / "middle.toml").read_text())
            homes.append(home)
        started = time.perf_counter()
        procs = [subprocess.Popen([*middle, "worker", "--once", "--fake", "--parallel", "1"], cwd=h,
                                  env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for h in homes]
        walls = []
        for p in procs:
            out = p.communicate()[0]
            walls.append(time.perf_counter() - started)
            if p.returncode != 0:
                raise ConfigError(f"a benchmark worker failed ({p.returncode}): {out.decode()[-800:]}")
        wall = max(walls)
        with TicketStore(url, readonly=True) as store:
            runs = [r for t in store.list_tickets() for r in store.list_runs(t.id)]
            turns = [t for r in runs for t in store.list_turns(run_id=r["id"])]
        if len(runs) != tickets or any(r["status"] != "complete" for r in runs):
            raise ConfigError(f"expected {tickets} complete runs, found {[r['status'] for r in runs]}")
        in_runs = sum(_seconds(r["started_at"], r["ended_at"]) for r in runs)
        claude = sum(_seconds(t["started_at"], t["ended_at"]) for t in turns)
        return {"backend": f"{workers} worker(s)", "workers": workers, "tickets": tickets, "wall_s": wall,
                "tickets_per_min": tickets / wall * 60, "claude_code_s_per_ticket": claude / tickets,
                "framework_s_per_ticket": (in_runs - claude) / tickets,
                "coordination_s_per_ticket": (sum(walls) - in_runs) / tickets}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _claimer(url: str, ids: list[str], start_at: float, out: Any) -> None:
    from tickets.store import TicketStore

    times, won = [], 0
    with TicketStore(url) as store:
        time.sleep(max(0.0, start_at - time.time()))
        for tid in ids:
            t = time.perf_counter()
            if store.claim_new_run(tid, ["pending"]):
                won += 1
            times.append((time.perf_counter() - t) * 1000)
    out.put((times, won))


def measure_claims(url: str, processes: int, tickets: int) -> dict[str, Any]:
    """P processes each try to claim every ticket of one backlog (in shuffled orders)."""
    import multiprocessing as mp
    import random

    from tickets.model import Ticket
    from tickets.store import TicketStore

    ids = [f"c{i:04d}" for i in range(tickets)]
    with TicketStore(url) as store:
        for tid in ids:
            store.upsert_ticket(Ticket(id=tid, project_id="bench", title=tid, project_path="/tmp"))
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 3.0  # every process connected before the race starts
    procs = []
    for k in range(processes):
        order = ids[:]
        random.Random(k).shuffle(order)
        procs.append(ctx.Process(target=_claimer, args=(url, order, start_at, out)))
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    times = [t for ts, _ in results for t in ts]
    won = sum(w for _, w in results)
    if won != tickets:
        raise ConfigError(f"{won} claims won for {tickets} tickets: a ticket was claimed twice or never")
    return {"backend": f"{processes} processes", "processes": processes, "tickets": tickets,
            "attempts": len(times), "claims_won": won, "claim_p50_ms": percentile(times, 50),
            "claim_p95_ms": percentile(times, 95)}


@click.command()
@click.option("--workers", default="1,2,4", show_default=True, help="Worker counts, comma-separated.")
@click.option("--tickets", type=click.IntRange(1, 500), default=12, show_default=True)
@click.option("--claimers", type=click.IntRange(1, 64), default=8, show_default=True,
              help="Processes racing for claims.")
@click.option("--claim-tickets", type=click.IntRange(1, 5000), default=400, show_default=True)
@click.option("--store-url", default=None, help="A PostgreSQL server to use (default: start the bundled one).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def fleet(workers: str, tickets: int, claimers: int, claim_tickets: int, store_url: str | None,
          as_json: bool) -> None:
    """`middle worker` processes on one PostgreSQL store: throughput and claim latency."""
    import json

    from orchestrator.bench.report import console, positive_ints
    from orchestrator.bench.report import table as _table

    counts = positive_ints(workers, "1,2,4", "--workers")
    _, fresh, stop = _server(store_url)
    try:
        rows = [measure_workers(fresh(), n, tickets) for n in counts]
        claims = measure_claims(fresh(), claimers, claim_tickets)
    finally:
        stop()
    report = {"dataset": f"{tickets} one-turn tickets on the built-in fake model", "kind": "fleet",
              "results": rows, "claims": claims}
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    console.print(_table(f"fleet benchmark: {report['dataset']}", rows,
                         ["backend", "wall_s", "tickets_per_min", "claude_code_s_per_ticket",
                          "framework_s_per_ticket", "coordination_s_per_ticket"], label="workers"))
    console.print(_table(f"claims: {claim_tickets} tickets, {claimers} processes racing", [claims],
                         ["backend", "attempts", "claims_won", "claim_p50_ms", "claim_p95_ms"], label="claimers"))
