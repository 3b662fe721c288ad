"""`middle doctor`: one table of the coding agent and the model a run will use, and whether each works."""

from __future__ import annotations

import sys

import click

from orchestrator.cli.output import console, err_console, make_table, safe


@click.command()
@click.option("--offline", is_flag=True, help="Do not call the model: only look for its credentials (missing "
              "ones are a warning: `middle run --fake` needs none).")
@click.pass_context
def doctor(ctx: click.Context, offline: bool) -> None:
    """Say which coding agent and which model a run will use and whether each can be used.

    Without --offline the model gets one tiny call (a few tokens). Exits 1 when something
    cannot be used, with one line for each problem saying what to do. With --offline the
    model's missing credentials are a warning, not a failure (an offline run needs none).
    """
    from orchestrator.cli.context import get_config
    from orchestrator.doctor import diagnose

    checks = diagnose(get_config(ctx, required=False), offline=offline)
    table = make_table("part", "uses", "where", "status")
    for check in checks:
        colour = "yellow" if check.warning else "green" if check.ok else "red"
        table.add_row(check.part, safe(check.uses), safe(check.where), f"[{colour}]{safe(check.status)}[/]")
    console.print(table)
    for check in checks:
        if check.problem:
            said = "[bold yellow]warning:[/]" if check.warning else "[bold red]error:[/]"
            err_console.print(f"{said} {check.part} ({safe(check.uses)}): {safe(check.problem)}")
    if not all(c.ok for c in checks):
        sys.exit(1)
    if any(c.warning for c in checks):
        console.print("ready for `middle run --fake` (the built-in offline model); `middle run` needs what the "
                      "warning says")
    else:
        console.print("ready: `middle run` will use these")
