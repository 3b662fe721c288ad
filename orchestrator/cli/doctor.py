"""`middle doctor`: one table of the coding agent and the model a run will use, and whether each works."""

from __future__ import annotations

import sys

import click

from orchestrator.cli.output import console, err_console, make_table, safe


@click.command()
@click.option("--offline", is_flag=True, help="Do not call the model: only look for its credentials.")
@click.pass_context
def doctor(ctx: click.Context, offline: bool) -> None:
    """Say which coding agent and which model a run will use and whether each can be used.

    Without --offline the model gets one tiny call (a few tokens). Exits 1 when something
    cannot be used, with one line for each problem saying what to do.
    """
    from orchestrator.cli.context import get_config
    from orchestrator.doctor import diagnose

    checks = diagnose(get_config(ctx, required=False), offline=offline)
    table = make_table("part", "uses", "where", "status")
    for check in checks:
        status = f"[green]{safe(check.status)}[/]" if check.ok else f"[red]{safe(check.status)}[/]"
        table.add_row(check.part, safe(check.uses), safe(check.where), status)
    console.print(table)
    problems = [c for c in checks if not c.ok]
    for check in problems:
        err_console.print(f"[bold red]error:[/] {check.part} ({safe(check.uses)}): {safe(check.problem)}")
    if problems:
        sys.exit(1)
    console.print("ready: `middle run` will use these")
