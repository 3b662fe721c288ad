"""Built-in plugin, through the same hook a third-party plugin would use (`on_ticket_complete`):
a ticket that completes with an open pull request (a review round: the human's feedback, or one
its CI or reviews started) has its new commits pushed to it and its description rewritten; with
`[run] on_complete = "pr"` a ticket that completes without one gets its pull request opened."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from orchestrator.plugins.hookspecs import hookimpl

if TYPE_CHECKING:
    from tickets.store import TicketStore


@hookimpl
def on_ticket_complete(ticket: Any, run_id: str, config: Any, store: TicketStore, say: Callable[[str], None]) -> None:
    if config is None:
        return
    from orchestrator.errors import MiddleError

    run = store.get_run(run_id)
    # What the run's end recorded as due (orchestrator.lifecycle: "update" the open pull request a
    # round carries, "open" one for `[run] on_complete = "pr"`); cleared by propose once done.
    due = run.get("pr_due")
    if not due:
        return
    has_pull = due == "update"
    from orchestrator.github.pull_updates import propose

    try:
        propose(store, config, ticket.id, say=say)  # (one it has is updated, not opened again)
    except MiddleError as exc:  # the ticket stays complete; the next `middle pr` finishes it
        what = f"pull request {run['pr_url']} of {ticket.id} not updated" if has_pull else \
            f"pull request of {ticket.id} not opened"
        say(f"{what}: {exc} (the next `middle sync` tries again, or `middle pr {ticket.id}`)")
