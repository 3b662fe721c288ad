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
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        console.print(safe(line))

    pull = open_pull_request(store, config, ticket_id, say=say)
    if not said:  # asked again for the same run: say where it is rather than nothing
        console.print(f"ticket {safe(ticket_id)} already has its pull request: {safe(pull.url)}")
