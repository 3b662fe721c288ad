"""`middle feedback ID "text"`: ask for changes to a ticket (a review round)."""

from __future__ import annotations

import sys

import click

from orchestrator.cli.output import console, report, safe


@click.command()
@click.argument("ticket_id")
@click.argument("words", nargs=-1, required=True, metavar="TEXT")
@click.option("--fake", is_flag=True, help="Use the built-in offline fake model instead of the API.")
@click.pass_context
def feedback(ctx: click.Context, ticket_id: str, words: tuple[str, ...], fake: bool) -> None:
    """Ask for changes: a complete or conflicted ticket continues on its branch with your words
    (a new review round, run here); a running one reads them at its next assessment.

    TEXT is best quoted (`middle feedback ID "also handle empty input"`); unquoted words are
    joined with spaces."""
    text = " ".join(words)
    from orchestrator.cli.context import get_config, services
    from orchestrator.cli.main import _interrupted, _stop_signals, open_orchestrator
    from orchestrator.lifecycle.next_steps import started_as
    from orchestrator.running import feedback as rounds

    started_as(fake=fake)  # stored for a dead run, its `middle resume ID` keeps --fake too

    config = get_config(ctx)
    store = services(ctx, config).store
    if rounds.check(store, ticket_id, text) == rounds.STORED:  # no model needed to store it
        message = rounds.store_for_run(store, ticket_id, text)
        if message is not None:
            console.print(safe(message))
            return
        # (None: the run completed meanwhile, so the feedback opens the next round, below)
    orch = open_orchestrator(ctx, config, fake)
    try:
        with _stop_signals():
            outcome = orch.feedback(ticket_id, text)
    except KeyboardInterrupt:
        _interrupted(ticket_id)
    report(outcome)
    if outcome.status not in ("complete", "stored"):
        sys.exit(1)

