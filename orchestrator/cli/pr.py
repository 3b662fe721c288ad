"""`middle pr ID`: push a complete ticket's branch and open its pull request on GitHub."""

from __future__ import annotations

import click

from orchestrator.cli.output import console, safe


@click.command()
@click.argument("ticket_id")
@click.pass_context
def pr(ctx: click.Context, ticket_id: str) -> None:
    """Open a complete ticket's pull request (its branch pushed to [project] repo_url or origin), or
    bring the one it has up to date (the commits of review rounds since pushed, its description
    rewritten)."""
    from orchestrator.cli.context import get_config, services
    from orchestrator.github.pull_updates import propose

    config = get_config(ctx)
    store = services(ctx, config).store
    propose(store, config, ticket_id, say=lambda line: console.print(safe(line)))
