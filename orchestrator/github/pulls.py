"""Open a complete ticket's pull request (once), and read pull requests' states back into tickets.

Safety: the intent ("opening") is recorded with the run before its branch is pushed, and the
pull request's URL once GitHub has it; a retry looks for an open pull request of the branch
before making one, so a crash or a failed call between the push and the record is finished by
the next `middle pr`, and no pull request is opened twice. Two at once take turns: the push and
the creation run under the ticket's claim in the store, so the second finds the first's pull
request. Every check that needs no push (the ticket's status, the token, the repository, the
remote) comes first.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ConfigError, GitError, TicketError
from orchestrator.killpoints import point
from tickets.github.client import GitHubClient, github_settings, parse_repo
from tickets.github.source import issue_number
from tickets.model import RunRow, Ticket, TicketStatus

if TYPE_CHECKING:
    from orchestrator.config.settings import Config
    from tickets.store import TicketStore

__all__ = ["PullRequest", "github_repo", "open_pull_request", "pull_body", "read_pull_states"]

PULL_URL = re.compile(r"/([^/]+)/([^/]+)/pull/(\d+)/?$")


@dataclass(frozen=True)
class PullRequest:
    """A ticket's pull request: its URL and number, and whether this call opened it."""

    url: str
    number: int
    created: bool


def _remote_repo(url: str) -> str | None:
    """OWNER/REPO of a remote URL on a git host (https://host/o/r.git, git@host:o/r.git); None for a path."""
    found = re.match(r"^(?:[a-z+]+://[^/]+/|[\w.-]+@[\w.-]+:)([\w.-]+)/([\w.-]+?)(?:\.git)?/?$", url)
    return f"{found.group(1)}/{found.group(2)}" if found else None


def github_repo(config: Config, ticket: Ticket, remote: str | None = None) -> str:
    """Where the ticket's pull request goes: [github] repo, a gh- ticket's repository, the github
    source's, else the repository the remote's URL names."""
    github = ticket.fields.get("github")
    for candidate in (config.github.repo,
                      github.get("repo") if isinstance(github, dict) else None,
                      config.tickets.options.get("repo") if config.tickets.kind == "github" else None,
                      _remote_repo(remote) if remote else None):
        if candidate:
            return parse_repo(candidate)
    raise ConfigError("no GitHub repository for the pull request: set [github] repo = \"OWNER/REPO\" in middle.toml")


def _push_target(config: Config, repo: Path) -> tuple[str, str]:
    """(what to push to, its URL): [project] repo_url, else the repository's `origin` remote."""
    from orchestrator.workspace import git as g

    if config.project.repo_url:
        return config.project.repo_url, config.project.repo_url
    found = g.git(repo, "remote", "get-url", "origin", check=False)
    if found.returncode != 0:
        raise ConfigError(f"no remote to push the ticket's branch to: set [project] repo_url in middle.toml, or "
                          f"add one with `git -C {repo} remote add origin URL`")
    return "origin", found.stdout.strip()


def pull_body(store: TicketStore, ticket: Ticket, run: RunRow, repo: str) -> str:
    """The pull request's text: the agent's summary, changed files, turns and cost, `Closes #N`."""
    parts = [(ticket.status_reason or "").strip() or ticket.title]
    changes = run.get("changes") or []
    if changes:
        lines = [f"- `{c.get('path')}` (+{c.get('added', 0)} -{c.get('deleted', 0)})" for c in changes
                 if isinstance(c, dict)]
        parts.append("Changed files:\n" + "\n".join(lines))
    turns = len(store.list_turns(run_id=run["id"]))
    cost = "offline run (the fake model): no cost" if run.get("offline") else f"${store.total_cost(run['id']):.2f}"
    parts.append(f"Turns: {turns} · cost: {cost}")
    checks = check_summary(store, run)
    if checks:
        parts.append(checks)
    rounds = rounds_summary(store, run)
    if rounds:
        parts.append(rounds)
    github = ticket.fields.get("github")
    number = issue_number(ticket.id)
    if number is not None and isinstance(github, dict) and isinstance(github.get("repo"), str):
        parts.append(f"Closes #{number}" if github["repo"] == repo else f"Closes {github['repo']}#{number}")
    parts.append(f"Opened by middle-agent for ticket `{ticket.id}`.")
    return "\n\n".join(parts)


def rounds_summary(store: TicketStore, run: RunRow) -> str:
    """The review rounds that led to the run, each with who asked for it ("" for a first run)."""
    runs = store.list_runs(run["ticket_id"])
    ids = [r["id"] for r in runs]
    lines = []
    for earlier in reversed(runs[: ids.index(run["id"]) + 1] if run["id"] in ids else []):
        number = store.round_of(earlier["id"])
        if number <= 1:
            break
        opening = store.feedback(earlier["id"])[:1]
        lines.append(f"- round {number}: {opening[0]['label'] if opening else 'feedback'}")
    return "Review rounds:\n" + "\n".join(reversed(lines)) if lines else ""


def check_summary(store: TicketStore, run: RunRow) -> str:
    """The run's last check result per command, for the pull request: what ran, how it ended,
    and the corrections it took ("" when the project has no checks)."""
    last: dict[str, dict[str, Any]] = {}
    for event in store.list_events(run_id=run["id"], limit=100_000):
        if event["kind"] == "check" and event["data"].get("phase") == "check":
            last[str(event["data"].get("command"))] = event["data"]
    if not last:
        return ""
    lines = [
        f"- `{cmd}`: {d.get('label') or d.get('outcome')} "
        f"({'timed out' if d.get('timed_out') else 'exit ' + str(d.get('exit_code'))}"
        f", {float(d.get('duration_s') or 0):.0f}s)"
        for cmd, d in last.items()
    ]
    corrections = int(run.get("corrections") or 0)
    head = "Checks" + (f" (after {corrections} correction{'' if corrections == 1 else 's'})" if corrections else "")
    return head + ":\n" + "\n".join(lines)


def client_for(config: Config, repo: str) -> GitHubClient:
    api_url, token_env, max_wait = github_settings(config.github.model_dump())
    return GitHubClient(repo, api_url=api_url, token_env=token_env, max_wait_s=max_wait)


def _open_pull(gh: GitHubClient, owner: str, branch: str) -> dict[str, Any] | None:
    """The open pull request whose head is `branch`, if there is one."""
    found = gh.get_all(
        "/pulls", {"head": f"{owner}:{branch}", "state": "open", "per_page": 100}, f"the pull requests of {branch}"
    )
    return next(
        (
            p
            for p in found
            if isinstance(p, dict)
            and isinstance(p.get("html_url"), str)
            and isinstance(p.get("head"), dict)
            and p["head"].get("ref") == branch
        ),
        None,
    )


def open_pull_request(
    store: TicketStore, config: Config, ticket_id: str, say: Callable[[str], None] = print
) -> PullRequest:
    """Push the complete ticket's branch and open its pull request, or return the one it has."""
    ticket = store.get_ticket(ticket_id)
    if ticket.status is not TicketStatus.COMPLETE:
        raise TicketError(
            f"ticket {ticket_id!r} is {ticket.status.value}, not complete: a pull request is opened "
            "for a complete ticket (see `middle tickets`)"
        )
    run = store.latest_run(ticket_id)
    if (run is None or run["status"] != "complete" or not run["branch"] or not run["head_commit"]
            or not run["repo"]):
        raise TicketError(
            f"ticket {ticket_id!r} has no committed branch to propose (it ran without its own "
            "branch, or changed nothing): nothing to open a pull request for"
        )
    if run.get("pr_url"):
        return _has_one(run, ticket_id, say)
    repo_path = Path(run["repo"])  # type: ignore[arg-type]  # checked above (mypy does not narrow keys)
    target, url = _push_target(config, repo_path)
    repo = github_repo(config, ticket, url)
    base = run.get("base_branch") or config.project.base_branch
    if not base:
        raise TicketError(f"ticket {ticket_id!r} records no base branch: set [project] base_branch")
    with client_for(config, repo) as gh:
        gh.get("", f"the repository {repo}")  # the token, the name and the network, before any push
        with _holding(store, ticket_id, run["id"], say):
            run = store.get_run(run["id"])
            if run.get("pr_url"):  # another `middle pr` opened it while this one waited
                return _has_one(run, ticket_id, say)
            pull, created = _push_and_open(store, gh, ticket, run, target, url, repo, base)
            point("pr.opened")  # (a second `middle pr` finds the open pull request by its branch)
            store.set_run_fields(run["id"], pr_url=pull["html_url"], pr_state="open")
    number = pull["number"] if isinstance(pull.get("number"), int) else 0
    say(
        f"{'opened' if created else 'found'} pull request {pull['html_url']} for {ticket_id} "
        f"({run['branch']} -> {base})"
    )
    return PullRequest(pull["html_url"], number, created)


def _push(run: RunRow, target: str, url: str, ticket_id: str) -> None:
    """Push the run's last commit to the ticket's branch on the pull request's remote."""
    from orchestrator.workspace import git as g

    branch, repo = run["branch"], run["repo"]
    if not branch or not repo or not run["head_commit"]:
        raise TicketError(f"ticket {ticket_id!r} has no committed branch to push: run it first")
    try:
        g.git(Path(repo), "push", "--quiet", "--force", target, f"{run['head_commit']}:refs/heads/{branch}")
    except GitError as exc:
        raise TicketError(
            f"could not push {branch} to {url}: {exc}; fix the remote, then run `middle pr {ticket_id}` again"
        ) from None


def _has_one(run: RunRow, ticket_id: str, say: Callable[[str], None]) -> PullRequest:
    url = run["pr_url"] or ""  # (called when the run has one)
    found = PULL_URL.search(url)
    say(f"ticket {ticket_id} already has its pull request: {url}")
    return PullRequest(url, int(found.group(3)) if found else 0, created=False)


HOLD_POLL_S = 0.2  # how often a `middle pr` that waits for another one's hold looks again


@contextmanager
def _holding(store: TicketStore, ticket_id: str, run_id: str, say: Callable[[str], None]) -> Iterator[None]:
    """Hold the complete ticket's claim (tickets.claims) from the push to the record of its pull
    request: a second `middle pr` of it, in another process or on another machine sharing the
    store, waits here and then finds the first one's pull request instead of opening another
    (GitHub does not always refuse a second one for the same branch)."""
    said = False
    while not store.hold(ticket_id, run_id, ("complete",)):
        ticket = store.get_ticket(ticket_id)
        if ticket.status is not TicketStatus.COMPLETE:  # merged, discarded or run again meanwhile
            raise TicketError(
                f"ticket {ticket_id!r} is {ticket.status.value} now, not complete: no pull request "
                "is opened (see `middle tickets`)"
            )
        claim = store.get_claim(ticket_id)
        if not said and claim is not None:
            say(f"waiting for {claim.describe()}, which holds ticket {ticket_id} (another `middle pr`)")
            said = True
        time.sleep(HOLD_POLL_S)  # until it is released, or its lease runs out (its process died)
    try:
        yield
    finally:
        store.release_hold(ticket_id, run_id)


def _push_and_open(
    store: TicketStore,
    gh: GitHubClient,
    ticket: Ticket,
    run: RunRow,
    target: str,
    url: str,
    repo: str,
    base: str,
) -> tuple[dict[str, Any], bool]:
    """Push the branch (the intent recorded first) and find or open its pull request: (it, opened now)."""

    branch, owner = run["branch"] or "", repo.split("/")[0]  # (a run with a branch: see open_pull_request)
    store.set_run_fields(run["id"], pr_state="opening")  # the intent, before the branch is out
    _push(run, target, url, ticket.id)
    store.refresh_claim(ticket.id, run["id"])  # a slow push must not let the hold's lease run out
    pull = _open_pull(gh, owner, branch)
    created = pull is None
    if pull is None:
        body = {"title": ticket.title, "head": branch, "base": base, "body": pull_body(store, ticket, run, repo)}
        resp = gh.request("POST", gh.url("/pulls"), json=body)
        if resp.status_code == 422 and "already exists" in resp.text:  # opened elsewhere meanwhile
            pull, created = _open_pull(gh, owner, branch), False
        if pull is None:
            pull = gh.check(resp, f"the new pull request of {branch}")
    if not isinstance(pull, dict) or not str(pull.get("html_url")).startswith(("https://", "http://")):
        # (the URL is shown as a link on the ticket page: nothing but a web address is kept)
        raise TicketError(f"GitHub's answer has no pull request URL: run `middle pr {ticket.id}` again")
    return pull, created


# A ticket whose pull request is followed: complete, or failed in a round since (an automatic
# round that failed leaves the pull request open on GitHub: its next CI failure or review still
# starts a round, within [github] auto_rounds, and its merge or close is still read).
FOLLOWED = ("complete", "failed")


def open_pulls(store: TicketStore) -> Iterator[tuple[Ticket, RunRow, str, str, str]]:
    """(ticket, its latest run, pull request URL, repository, number) for every complete (or
    failed since) ticket whose latest run's pull request was open when last seen."""
    for ticket in (t for status in FOLLOWED for t in store.list_tickets(status=status)):
        run = store.latest_run(ticket.id)
        pr_url = run["pr_url"] if run else None
        if not run or run["pr_state"] != "open" or not pr_url:
            continue
        match = PULL_URL.search(pr_url)
        if match is not None:
            yield ticket, run, pr_url, parse_repo(f"{match.group(1)}/{match.group(2)}"), match.group(3)


def read_pull_states(store: TicketStore, config: Config) -> list[tuple[str, str, str, str]]:
    """(ticket id, run id, "merged", "closed" or "gone", URL) for each followed ticket whose open pull
    request GitHub has merged or closed since, or no longer has (404, its repository still there);
    nothing is written here."""
    found: list[tuple[str, str, str, str]] = []
    for ticket, run, pr_url, repo, number in open_pulls(store):
        with client_for(config, repo) as gh:
            pull = gh.get(f"/pulls/{number}", f"pull request #{number} of {repo}", missing_ok=True)
            if pull is None:  # a repository that is gone (or hidden from the token) stays that error
                gh.get("", f"the repository {repo}")
        if pull is None:
            found.append((ticket.id, run["id"], "gone", pr_url))
        elif isinstance(pull, dict) and pull.get("merged") is True:
            found.append((ticket.id, run["id"], "merged", pr_url))
        elif isinstance(pull, dict) and pull.get("state") == "closed":
            found.append((ticket.id, run["id"], "closed", pr_url))
    return found


def apply_pull_states(store: TicketStore, states: list[tuple[str, str, str, str]]) -> list[str]:
    """Mark tickets merged (pull request merged) or discarded (closed unmerged); a pull request
    GitHub no longer has is forgotten (the ticket stays complete; `middle pr` opens a new one).
    Lines saying what changed, each said once (the run's pr_state is no longer "open" after)."""
    said = []
    for ticket_id, run_id, state, url in states:
        if state == "gone":
            store.set_run_fields(run_id, pr_url=None, pr_state="gone")
            said.append(
                f"note: pull request {url} of {ticket_id} is gone from GitHub: forgotten; "
                f"`middle pr {ticket_id}` opens a new one"
            )
            continue
        status = "merged" if state == "merged" else "discarded"
        why = f"pull request {url} was {'merged' if state == 'merged' else 'closed unmerged'} on GitHub"
        marked = store.close_pull(run_id, state, ticket_id, FOLLOWED, status, why)  # one transaction
        point("pr.read")
        if marked:
            said.append(f"{status} {ticket_id}: {why}")
    return said
