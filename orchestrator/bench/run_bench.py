"""`middle bench runs`: a backlog run end to end on the built-in fake, one ticket at a time against
N at once. Each measured run is a whole `middle run --fake --parallel N` process in a fresh copy
of the sample repository (real git worktrees, the real Claude Code CLI), so the figures include
everything a user waits for. From the ticket store it splits the wall time into Claude Code's own
turns (process start to exit), the framework's work around them per ticket (claim, worktree, the
middle agent's calls, memory, commit), and the process's start and end.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import click

from orchestrator.errors import ConfigError


def _ticket(i: int) -> str:
    return (f"---\ntitle: Add module {i}\nproject: calc\n---\nCreate `calc/mod{i}.py` with:\n"
            f"```python\nVALUE_{i} = {i}\n```\n")


def _project(root: Path, tickets: int, examples: Path, claude_cli: str | None, checks: tuple[str, ...] = ()) -> None:
    from orchestrator.testing.git import make_repo

    shutil.copytree(examples / "sample-repo", root / "repo")
    make_repo(root / "repo")
    (root / "tickets").mkdir()
    for i in range(tickets):
        (root / "tickets" / f"{i:03d}-mod{i}.md").write_text(_ticket(i))
    cli = f'cli_path = "{claude_cli}"\n' if claude_cli else ""
    check = f"[check]\ncommands = {json.dumps(list(checks))}\n" if checks else ""
    (root / "middle.toml").write_text(
        '[project]\npath = "repo"\n[memory]\nsave_dir = ".middle/memory"\nbackend = "bm25"\n'
        f'{check}[coding_agent.options]\nturn_timeout_s = 300\n{cli}')


def _seconds(a: str, b: str | None) -> float:
    if b is None:  # still running (a bench reads ended runs only)
        return 0.0
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def measure_once(tickets: int, parallel: int, examples: Path, claude_cli: str | None = None,
                 checks: tuple[str, ...] = ()) -> dict[str, Any]:
    """One whole `middle run --fake --parallel N` of a fresh backlog; wall time and its parts (with
    `checks`, the project's [check] commands: their time per ticket and the corrections)."""
    from tickets.store import TicketStore

    root = Path(tempfile.mkdtemp(prefix="middle-bench-runs-"))
    try:
        _project(root, tickets, examples, claude_cli, checks)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_"))}
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "run", "--fake", "--parallel",
                               str(parallel)], cwd=root, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise ConfigError(f"`middle run --fake --parallel {parallel}` failed in the benchmark "
                              f"project ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-500:]}")
        with TicketStore(root / ".middle" / "middle.sqlite3", readonly=True) as store:
            runs = [r for t in store.list_tickets() for r in store.list_runs(t.id)]
            turns = store.list_turns()
            usage = store.memory_usage()["by_backend"]
            check_s = sum(float(e["data"].get("duration_s") or 0) for e in store.list_events(limit=1_000_000)
                          if e["kind"] in ("check", "setup"))
        claude = sum(_seconds(t["started_at"], t["ended_at"]) for t in turns)
        in_runs = sum(_seconds(r["started_at"], r["ended_at"]) for r in runs)
        first = min(r["started_at"] for r in runs)
        last = max(r["ended_at"] or r["started_at"] for r in runs)
        return {"parallel": parallel, "tickets": len(runs), "wall_s": wall,
                "claude_code_s_per_ticket": claude / len(runs),
                "framework_s_per_ticket": (in_runs - claude) / len(runs),
                "process_start_end_s": wall - _seconds(first, last),
                "complete": sum(r["status"] == "complete" for r in runs),
                # The check loop's cost: the checks' own seconds per ticket (base and final runs),
                # and the check failures fed back to the middle agent.
                "check_s_per_ticket": check_s / len(runs),
                "corrections": sum(int(r.get("corrections") or 0) for r in runs),
                # How often the middle agent said it used a memory its recalls showed it (the
                # fake model names those whose words its ticket shares), per memory backend.
                "memories_recalled": sum(u["recalled"] for u in usage.values()),
                "memories_used": sum(u["used"] for u in usage.values()),
                "use_by_backend": {b: dict(u) for b, u in usage.items()}}
    finally:
        shutil.rmtree(root, ignore_errors=True)  # nothing is left behind in the temp folder


def run_runs(tickets: int, parallels: list[int], repeat: int, examples: Path,
             progress: Callable[[str, int], Callable[[int], None]] | None = None,
             claude_cli: str | None = None, checks: tuple[str, ...] = ()) -> dict[str, Any]:
    """`repeat` alternating rounds of each parallel setting; medians per setting, and the ratios."""
    samples: dict[int, list[dict[str, Any]]] = {p: [] for p in parallels}
    advance = progress("runs", repeat * len(parallels)) if progress else (lambda n=1: None)
    for _ in range(repeat):
        for p in parallels:  # A B A B: a drifting machine affects both alike
            samples[p].append(measure_once(tickets, p, examples, claude_cli, checks))
            advance(1)
    results = []
    for p, rows in samples.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]
               if k not in ("parallel", "tickets", "use_by_backend")}
        med["use_rate"] = (med["memories_used"] / med["memories_recalled"]
                           if med["memories_recalled"] else 0.0)
        med["use_by_backend"] = rows[-1]["use_by_backend"]
        results.append({"backend": f"--parallel {p}", "parallel": p, "tickets": tickets, "runs": len(rows),
                        **med, "wall_s_min": min(r["wall_s"] for r in rows),
                        "wall_s_max": max(r["wall_s"] for r in rows)})
    base = results[0]["wall_s"]
    for row in results:
        row["speedup"] = base / row["wall_s"]
    with_checks = f", [check] {', '.join(checks)}" if checks else ""
    return {"dataset": f"{tickets} one-turn tickets on the built-in fake model{with_checks}", "kind": "runs",
            "results": results}


@click.command()
@click.option("--tickets", type=click.IntRange(1, 200), default=8, show_default=True)
@click.option("--parallel", "parallels", type=click.IntRange(1, 64), multiple=True,
              help="Settings to compare, repeatable (default: 1 and 4).")
@click.option("--repeat", type=click.IntRange(1, 50), default=3, show_default=True,
              help="Whole runs per setting, alternated.")
@click.option("--check", "checks", multiple=True, metavar="CMD",
              help="A [check] command for the backlog's project, repeatable: measures the check loop's "
                   "cost per ticket (compare with a run without it).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--progress/--no-progress", default=True, help="Progress bar on stderr.")
def runs(tickets: int, parallels: tuple[int, ...], repeat: int, checks: tuple[str, ...], as_json: bool,
         progress: bool) -> None:
    """A backlog end to end on the fake model: one at a time against N at once (wall time, overhead)."""
    from orchestrator.bench.report import console, progress_bar
    from orchestrator.bench.report import table as _table
    from orchestrator.cli.examples import examples_dir

    with progress_bar(progress) as track:
        report = run_runs(tickets, list(parallels or (1, 4)), repeat, examples_dir(), progress=track, checks=checks)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    console.print(_table(f"runs benchmark: {report['dataset']} (medians of {repeat})", report["results"],
                         ["backend", "wall_s", "wall_s_min", "wall_s_max", "speedup",
                          "claude_code_s_per_ticket", "framework_s_per_ticket", "process_start_end_s",
                          "memories_recalled", "memories_used", "use_rate", "check_s_per_ticket", "corrections"],
                         label="setting"))
