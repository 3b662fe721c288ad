"""`middle feedback ID "text"`: ask for changes to a ticket (a review round), and how `middle log`
shows each round."""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from orchestrator.cli.output import console, report, safe


@click.command()
@click.argument("ticket_id")
@click.argument("text")
@click.option("--fake", is_flag=True, help="Use the built-in offline fake model instead of the API.")
@click.pass_context
def feedback(ctx: click.Context, ticket_id: str, text: str, fake: bool) -> None:
    """Ask for changes: a complete or conflicted ticket continues on its branch with your words
    (a new review round, run here); a running one reads them at its next assessment."""
    from orchestrator.cli.context import get_config, services
    from orchestrator.cli.main import _interrupted, _stop_signals, open_orchestrator
    from orchestrator.running import feedback as rounds

    config = get_config(ctx)
    store = services(ctx, config).store
    if rounds.check(store, ticket_id, text) == rounds.STORED:  # no model needed to store it
        console.print(safe(rounds.store_for_run(store, ticket_id, text)))
        return
    orch = open_orchestrator(ctx, config, fake)
    try:
        with _stop_signals():
            outcome = orch.feedback(ticket_id, text)
    except KeyboardInterrupt:
        _interrupted(ticket_id)
    report(outcome)
    if outcome.status not in ("complete", "stored"):
        sys.exit(1)


def round_lines(out: Console, store: Any, run: dict[str, Any]) -> None:
    """Under a run in `middle log`: its review round and the human's feedback it got."""
    if not hasattr(store, "feedback"):
        return
    events = store.feedback(run["id"])
    opening = events[0] if events and events[0].get("round") else None
    if opening is not None:
        out.print(f"  [bold]round {opening['round']}[/] — the human's feedback: "
                  + escape(" / ".join([*opening.get("carried", []), opening["text"]])), soft_wrap=True)
    for event in events:
        if event is not opening:
            out.print("  [bold]feedback while running[/] " + escape(f"({event['at'][:19]}): {event['text']}"),
                      soft_wrap=True)
