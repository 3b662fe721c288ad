"""Built-in plugin: `[run] on_complete = "pr"` opens a pull request for every ticket that
completes, through the same hook a third-party plugin would use (`on_ticket_complete`)."""

from __future__ import annotations

from typing import Any, Callable

from orchestrator.plugins.hookspecs import hookimpl


@hookimpl
def on_ticket_complete(ticket: Any, run_id: str, config: Any, store: Any, say: Callable[[str], None]) -> None:
    if config is None or config.run.on_complete != "pr":
        return
    from orchestrator.errors import MiddleError
    from orchestrator.github.pulls import open_pull_request

    try:
        open_pull_request(store, config, ticket.id, say=say)
    except MiddleError as exc:  # the ticket stays complete; the next `middle pr` finishes it
        say(f"pull request of {ticket.id} not opened: {exc} (retry with `middle pr {ticket.id}`)")
