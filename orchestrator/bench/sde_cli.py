"""The `middle bench sde DIR` command: its options, and the report as tables or JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from .report import at_least_one, console, progress_bar, report_options, table

DEFAULT_BOLTONS = "~/dev/_sdebench_hosts/boltons"  # where sde-bench's own docs put the clone


def _yes(value: Any) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _cost(row: dict[str, Any]) -> str:
    """The dollars a row spent; a run on the offline fake model spent none (as `middle run --fake` says)."""
    from orchestrator.cli.output import OFFLINE_COST

    return OFFLINE_COST if row.get("offline") else f"{row['cost_usd']:.2f}"


def print_report(report: dict[str, Any]) -> None:
    """Per task and arm (the ticket's status: a failed one says why in the JSON's `reason`), then
    per arm; the JSON has the same under its full key names."""
    rows = [{"backend": r["task"], "arm": r["arm"], "status": r["status"], "solved": "pass" if r["solved"] else "FAIL",
             "hidden": _yes(r["hidden_passed"]), "corrections": r["corrections"], "turns": r["turns"],
             "cost $": _cost(r), "decision shown": _yes(r["decision_recalled"])}
            for r in report["results"]]
    console.print(table(f"sde benchmark: {report['dataset']}; memory on: {report['backend']}; {report['model']}",
                        rows, list(rows[0]) if rows else ["backend"], label="task"))
    totals = [{"backend": t["arm"], "tasks": t["tasks"], "solved": t["solved"], "pass rate": t["pass_rate"],
               "hidden passed": t["hidden_passed"], "corrections/task": f"{t['mean_corrections']:.2f}",
               "turns/task": f"{t['mean_turns']:.1f}", "cost $": _cost(t),
               "decision shown": t["decision_recalled"]} for t in report["totals"]]
    console.print(table("per arm", totals, list(totals[0]) if totals else ["backend"], label="arm"))


@click.command()
@click.argument("checkout", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--boltons", "boltons", type=click.Path(path_type=Path), default=None,
              help="A git clone of boltons, with its history (git clone https://github.com/mahmoud/boltons); "
              f"default: $SDEBENCH_BOLTONS_HOST, else {DEFAULT_BOLTONS}.")
@click.option("--task", "tasks", multiple=True, help="A task to run, repeatable: its folder (boltons-budget), "
              "the folder without boltons- (budget) or its task id (default: every task, by name).")
@click.option("--limit", type=int, callback=at_least_one, default=None, help="Run only the first N tasks.")
@click.option("--backend", default="hybrid", show_default=True,
              help="The memory-on arm's backend, NAME or NAME:key=value,...; the memory-off arm is `none`.")
@click.option("--max-rounds", type=click.IntRange(min=0), default=5, show_default=True,
              help="Check failures fed back before a ticket fails ([check] max_rounds; sde-bench's cap is 5).")
@click.option("--fake", is_flag=True, help="The built-in offline fake model instead of the API: checks the "
              "wiring only (it can fix no real task).")
@report_options
def sde(checkout: Path, boltons: Path | None, tasks: tuple[str, ...], limit: int | None, backend: str,
        max_rounds: int, fake: bool, as_json: bool, progress: bool) -> None:
    """sde-bench's tasks end to end from DIR, a checkout of it (git clone https://github.com/vectorize-io/sde-bench):
    each task's repository built from the boltons clone, its bug report run as a ticket whose check
    is the task's failing tests, then graded with its hidden test; memory on (its decision chats
    and git history imported) against memory off. Needs a real model (ANTHROPIC_API_KEY) to mean
    anything; --fake checks the wiring."""
    from .sde import run_sde

    where = boltons or Path(os.environ.get("SDEBENCH_BOLTONS_HOST") or DEFAULT_BOLTONS).expanduser()
    with progress_bar(progress) as track:
        report = run_sde(checkout, where, tasks=tasks, limit=limit, backend=backend, fake=fake,
                         max_rounds=max_rounds, progress=track)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    print_report(report)
