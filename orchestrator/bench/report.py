"""What every `middle bench` command shares: the console, the progress bar, the table and JSON
output, and the options and checks they all take."""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import runner

console = Console(highlight=False)
if not console.is_terminal:  # piped to a file: rich would assume 80 columns and squeeze the table
    console = Console(highlight=False, width=160)
err_console = Console(stderr=True, highlight=False)

BACKEND_HELP = ("Backend to measure, repeatable; NAME or NAME:key=value,... with options "
                "(e.g. hybrid:fusion=rrf).")


@contextmanager
def progress_bar(enabled: bool) -> Iterator[runner.Progress]:
    """A rich progress bar on stderr (so --json output stays clean); quiet when disabled or
    when stderr is no terminal (rich would only print a blank line when the bar ends)."""
    if not enabled or not err_console.is_terminal:
        yield runner.no_progress
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=True) as bar:
        # A pulsing bar from the first instant (reading the data set, loading a model), until
        # the first measured phase starts.
        starting = [bar.add_task("starting: reading data, loading models", total=None)]

        def track(description: str, total: int) -> Callable[[int], None]:
            if starting:
                bar.remove_task(starting.pop())
            task = bar.add_task(description, total=max(total, 1))
            return lambda n: bar.advance(task, n)

        yield track


def fmt(value: Any, column: str = "") -> str:
    """One precision per kind of column: fractions 3 decimals, milliseconds and rates 1, seconds 2."""
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.{_decimals(column)}f}"
    return str(value)


def _decimals(column: str) -> int:
    if column.endswith(("_ms", "per_min", "_mb")) or "_ms@" in column or column in ("speedup",):
        return 1 if column != "speedup" else 2
    if column.endswith("_ratio"):
        return 1
    if column.endswith(("_s", "_s_per_ticket", "_s_min", "_s_max")):
        return 2
    return 3  # recall, hit, MRR, precision: fractions between 0 and 1


# Short headers with their units, so a table fits 80 columns; --json has the full key names.
HEADERS = {
    "recall@2": "R@2", "recall@5": "R@5", "recall@10": "R@10", "hit@5": "hit@5", "mrr@10": "MRR@10",
    "hit@1": "hit@1", "stale_first": "stale first", "long_recall@5": "long R@5",
    "long_hit@5": "long hit@5", "long_scored": "long n",
    "block_precision": "block", "questions": "questions", "docs": "docs",
    "embed_s": "embed s", "index_s": "index s", "retrieve_p50_ms": "p50 ms", "retrieve_p95_ms": "p95 ms",
    "retrieve_cpu_p95_ms": "cpu p95 ms", "store_mb": "store MB", "index_ms_per_turn": "index ms/turn",
    "embed_per_1k_s": "embed s/1k", "index_per_1k_s": "index s/1k", "add_last_1k_s": "last 1k s",
    "index_p50_ms": "idx p50 ms", "index_p95_ms": "idx p95 ms", "index_cpu_p95_ms": "idx cpu p95 ms",
    "wall_s": "wall s", "wall_s_min": "min s", "wall_s_max": "max s", "speedup": "speedup ×",
    "claude_code_s_per_ticket": "Claude Code s/ticket", "framework_s_per_ticket": "framework s/ticket",
    "process_start_end_s": "start+end s", "tickets_per_min": "tickets/min",
    "coordination_s_per_ticket": "coordination s/ticket", "attempts": "attempts",
    "claims_won": "claims won", "claim_p50_ms": "claim p50 ms", "claim_p95_ms": "claim p95 ms",
    "commits": "commits", "cpu_s": "cpu s", "commits_per_s": "commits/s", "rerun_s": "rerun s",
    "check_s_per_ticket": "check s/ticket", "corrections": "corrections",
}


def table(title: str, rows: list[dict[str, Any]], columns: list[str], label: str = "backend") -> Table:
    """`label`: the header of the row-label column (the `backend` key: a backend, or a setting)."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        if column in ("backend", "category", "query", "set"):  # labels and numbers are never folded
            table.add_column(label if column == "backend" else column, no_wrap=True)
        else:
            table.add_column(HEADERS.get(column, column), justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*(fmt(row.get(c, ""), c) for c in columns))
    return table


def emit(report: dict[str, Any], as_json: bool, columns: list[str]) -> None:
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    console.print(table(f"{report['kind']} benchmark: {report['dataset']}", report["results"],
                         columns))
    for row in report["results"]:
        cats = row.get("by_category")
        if cats:
            cat_rows = [{"category": name, **values} for name, values in cats.items()]
            console.print(table(f"{row['backend']}: recall by category", cat_rows,
                                 ["category", "questions", "recall@2", "recall@5", "recall@10"]))


LATENCY = ["retrieve_p50_ms", "retrieve_p95_ms", "retrieve_cpu_p95_ms"]


def at_least_one(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    """A click callback: a count option of at least 1 (None when not given), checked before any
    data is read."""
    if value is not None and value < 1:
        raise click.BadParameter(f"{value}: give a number of at least 1", ctx=ctx, param=param)
    return value


def report_options(command: Any) -> Any:
    """`--json` and `--progress/--no-progress`, which every bench takes."""
    command = click.option("--progress/--no-progress", default=True, help="Progress bar on stderr.")(command)
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")(command)


def positive_ints(text: str, example: str, name: str) -> list[int]:
    """A comma-separated list of whole numbers of at least 1, or a usage error naming `name`."""
    try:
        values = [int(part.strip().replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise click.BadParameter(f"{text!r}: give numbers of at least 1 like {example}", param_hint=name)
    return values
