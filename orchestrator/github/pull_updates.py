"""Keep a ticket's open pull request up to date with the ticket: after a review round (the human's
`middle feedback`, or one the pull request's CI or reviews started) its new commits are pushed to
the pull request's branch and its description rewritten, by the same owner that opened it
(orchestrator.github.pulls). `middle pr ID` on a ticket whose pull request exists does the same
when the branch on the remote is behind or the description is stale, and says so when neither.

The push and the edit run under the ticket's claim in the store, as the opening does, so two at
once (a `middle pr` and a round's end on another machine) take turns.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import TicketError
from orchestrator.github.pulls import (
    PULL_URL,
    PullRequest,
    _holding,
    _push,
    _push_target,
    client_for,
    open_pull_request,
    pull_body,
)
from orchestrator.killpoints import point
from tickets.github.client import parse_repo

if TYPE_CHECKING:
    from orchestrator.config.settings import Config
    from tickets.store import TicketStore

__all__ = ["catch_up", "propose", "remote_tip", "update_pull_request"]


def propose(store: TicketStore, config: Config, ticket_id: str, say: Callable[[str], None] = print) -> PullRequest:
    """`middle pr ID` (and the API's, and `[run] on_complete = "pr"`): open the complete ticket's
    pull request, or bring the open one it has up to date (review rounds since). Done, what the
    run's end asked of its pull request (runs.pr_due) is cleared: no `middle sync` does it again."""
    from tickets.model import TicketStatus

    run = store.latest_run(ticket_id)
    if (store.get_ticket(ticket_id).status is TicketStatus.COMPLETE and run is not None and run["pr_url"]
            and run["pr_state"] == "open"):
        pull = update_pull_request(store, config, ticket_id, say)
    else:
        pull = open_pull_request(store, config, ticket_id, say)
    point("pr.proposed")  # (killed here, the next sync's propose finds it done and clears pr_due)
    if run is not None and run.get("pr_due"):
        store.set_run_fields(run["id"], pr_due=None)
    return pull


def remote_tip(repo: Path, target: str, branch: str) -> str | None:
    """The commit `branch` is at on the remote `target` (a name or URL); None when it has no such
    branch or cannot be read (then the push says what is wrong)."""
    from orchestrator.workspace import git as g

    found = g.git(repo, "ls-remote", "--heads", target, f"refs/heads/{branch}", check=False)
    if found.returncode != 0:
        return None
    for line in found.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        if ref.strip() == f"refs/heads/{branch}":
            return sha.strip()
    return None


def _holds(repo: Path, head: str, tip: str) -> bool:
    """Whether `head` contains `tip` (so pushing it loses no commit of the remote's branch); a
    commit this repository does not have is not contained."""
    from orchestrator.workspace import git as g

    return g.git(repo, "merge-base", "--is-ancestor", tip, head, check=False).returncode == 0


def update_pull_request(store: TicketStore, config: Config, ticket_id: str,
                        say: Callable[[str], None] = print) -> PullRequest:
    """Bring the complete ticket's open pull request to its latest run: push the run's last
    commit to the pull request's branch when the remote's is not there, and rewrite the
    description when it differs from what the ticket says now. Nothing changed: said so."""
    run = store.latest_run(ticket_id)
    url = (run["pr_url"] if run else None) or ""
    found = PULL_URL.search(url)
    if run is None or found is None or run["pr_state"] != "open":
        raise TicketError(f"ticket {ticket_id!r} has no open pull request to update: `middle pr {ticket_id}` "
                          "opens one")
    if not run["branch"] or not run["head_commit"] or not run["repo"]:
        raise TicketError(f"ticket {ticket_id!r} has no committed branch to push: run it first")
    repo, number = parse_repo(f"{found.group(1)}/{found.group(2)}"), int(found.group(3))
    target, remote_url = _push_target(config, Path(run["repo"]))
    with client_for(config, repo) as gh:
        pull = gh.get(f"/pulls/{number}", f"pull request #{number} of {repo}", missing_ok=True)
        if not isinstance(pull, dict) or pull.get("state") != "open":
            raise TicketError(f"pull request {url} of {ticket_id} is not open on GitHub any more: `middle sync` "
                              "reads what became of it")
        with _holding(store, ticket_id, run["id"], say):
            run = store.get_run(run["id"])  # as it is now that this process holds the ticket
            head, branch = run["head_commit"] or "", run["branch"] or ""
            tip = remote_tip(Path(run["repo"] or "."), target, branch)
            pushed = tip != head
            if tip and pushed and not _holds(Path(run["repo"] or "."), head, tip):
                raise TicketError(
                    f"the branch {branch} of pull request {url} has commits ticket {ticket_id} does not "
                    f"({tip[:10]}, pushed there by someone else?): they are not overwritten; fetch them and "
                    f"merge them into {branch}, or drop them with a force push of your own, then run "
                    f"`middle pr {ticket_id}` again")
            if pushed:
                _push(run, target, remote_url, ticket_id)
                store.refresh_claim(ticket_id, run["id"])  # a slow push must not let the hold's lease run out
            body = pull_body(store, store.get_ticket(ticket_id), run, repo)
            edited = body != pull.get("body")
            if edited:
                gh.check(gh.request("PATCH", gh.url(f"/pulls/{number}"), json={"body": body}),
                         f"the description of pull request #{number}")
    if pushed or edited:
        what = " and ".join(part for part, done in ((f"pushed {branch} ({head[:10]})", pushed),
                                                    ("rewrote its description", edited)) if done)
        say(f"updated pull request {url} of {ticket_id}: {what}")
    else:
        say(f"ticket {ticket_id} already has its pull request: {url} (up to date)")
    return PullRequest(url, number, created=False)


def catch_up(store: TicketStore, config: Config, say: Callable[[str], None]) -> None:
    """`middle sync`: what a complete ticket's run's end asked of its pull request and no hook did
    (runs.pr_due, written in the end's transaction and cleared by `propose`): a process killed
    between the two (the `run.hooks` point), or a push or GitHub call that failed then. "update":
    its open pull request gets the round's commit and description (also with `[project] repo_url`,
    where the round pushed the branch itself and only the description is behind); "open": the
    pull request `[run] on_complete = "pr"` asked for is opened, once (`middle pr`'s own intent
    record finds one a kill left unrecorded), unless `on_complete` was set back since. Read from
    the store alone: no GitHub call for a pull request nothing is due for. A remote that cannot be
    reached now is said and left for the next sync."""
    from orchestrator.errors import MiddleError

    for ticket_id in store.pr_due_tickets():  # (by a partial index: not every complete ticket's runs)
        run = store.latest_run(ticket_id)  # an earlier run's pr_due is not the ticket's to do
        due = run.get("pr_due") if run is not None else None
        if run is None or not due or run["status"] != "complete":
            continue
        if due == "open" and config.run.on_complete != "pr":
            continue  # (the intent was withdrawn: `middle pr` still opens it by hand)
        try:
            propose(store, config, ticket_id, say)
        except MiddleError as exc:  # the ticket stays complete; said at each sync until it is resolved
            what = "brought up to date" if due == "update" else "opened"
            say(f"pull request of {ticket_id} not {what}: {exc}")
