"""`middle pr ID`: push a complete ticket's branch and open its pull request on GitHub."""

from __future__ import annotations

import click

from orchestrator.cli.output import console, safe


@click.command()
@click.argument("ticket_id")
@click.pass_context
def pr(ctx: click.Context, ticket_id: str) -> None:
    """Open a complete ticket's pull request (its branch pushed to [project] repo_url or origin)."""
    from orchestrator.cli.context import get_config, services
    from orchestrator.github.pulls import open_pull_request

    config = get_config(ctx)
    store = services(ctx, config).store
    open_pull_request(store, config, ticket_id, say=lambda line: console.print(safe(line)))
