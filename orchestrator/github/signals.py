"""What a ticket's pull request says needs doing: CI that failed on it and reviews that request
changes, read back by `middle sync` and turned into a review round with them as the feedback, so
nobody copies a log or a review comment into `middle feedback` by hand.

- **Failed CI**: the check runs (GitHub Actions, other apps) and commit statuses of the pull
  request's head commit that failed (`failure`, `timed_out`, `error`); an Actions job's log tail
  is included where the API gives it.
- **Changes requested**: reviews in state `CHANGES_REQUESTED`, with their inline comments (path
  and line).
- Each one is acted on once (the store records it, `tickets/checks.py`'s pr_signals table); a pull
  request starts at most `[github] auto_rounds` rounds by itself (default 2) before it waits for a
  person (`middle feedback` is unlimited).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.config.settings import Config
from orchestrator.github.job_logs import JobLogs, job_key, job_logs_for
from orchestrator.killpoints import point
from tickets.github.client import GitHubClient
from tickets.store import TicketStore

PULL_NUMBER = re.compile(r"/pull/(\d+)/?$")
LOG_TAIL_CHARS = 3000  # of a failed Actions job's log, in the feedback
FAILED_CONCLUSIONS = ("failure", "timed_out", "cancelled", "action_required")
FAILED_STATES = ("failure", "error")


@dataclass
class PullSignals:
    """What one ticket's pull request asks for, not yet acted on."""

    ticket_id: str
    pr_url: str
    items: list[tuple[str, str, str]] = field(default_factory=list)  # (signal key, the text of it, who says it)

    @property
    def feedback(self) -> str:
        """The feedback of the round these start: every item's text."""
        return ("The pull request needs changes:\n\n" + "\n\n".join(text for _, text, _ in self.items)).strip()

    @property
    def by(self) -> str:
        """What started the round, for its label: `pull request #2: CI `tests`, review by alice`."""
        found = PULL_NUMBER.search(self.pr_url)
        who = list(dict.fromkeys(by for _, _, by in self.items))  # each once, in order
        return f"pull request {'#' + found.group(1) if found else self.pr_url}: {', '.join(who)}"


def read_signals(store: TicketStore, config: Config) -> list[PullSignals]:
    """For every followed ticket (complete, or failed in a round since) with an open pull request:
    what its CI and reviews ask that no round has acted on yet. Nothing is written here."""
    from orchestrator.github.pulls import client_for, open_pulls

    found = []
    for ticket, run, pr_url, repo, number in open_pulls(store):
        acted = store.acted_signals(ticket.id)
        with client_for(config, repo) as gh:
            pull = gh.get(f"/pulls/{number}", f"pull request #{number} of {repo}", missing_ok=True)
            if not isinstance(pull, dict) or pull.get("state") != "open":
                continue  # merged, closed or gone: `middle sync`'s pull states say so
            sha = _dict(pull.get("head")).get("sha")  # GitHub's answer is untrusted: a string head is none
            head = sha if isinstance(sha, str) and sha else str(run.get("head_commit") or "")
            logs = job_logs_for(config.state_path, repo, gh.api_url, LOG_TAIL_CHARS)
            items = [i for i in (*_failed_ci(gh, head, acted, logs), *_changes_requested(gh, number))
                     if i[0] not in acted]
            logs.save()
        if items:
            found.append(PullSignals(ticket.id, pr_url, items))
    return found


def _dict(value: Any) -> dict[str, Any]:
    """A part of GitHub's answer that should be an object, or {} when it is not (a malformed
    answer is read as one without that part, never a traceback)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _failed_ci(gh: GitHubClient, sha: str, acted: set[str], logs: JobLogs) -> list[tuple[str, str, str]]:
    """(signal key, text, who) for each failed check run and commit status of the commit (one
    already `acted` on is left out before its log is looked for)."""
    if not sha:
        return []
    items = []
    runs = _dict(gh.get(f"/commits/{sha}/check-runs", f"the check runs of {sha[:10]}", missing_ok=True))
    for check in _list(runs.get("check_runs")):
        if not isinstance(check, dict) or check.get("conclusion") not in FAILED_CONCLUSIONS \
                or f"check:{check.get('id')}" in acted:
            continue
        output = _dict(check.get("output"))
        lines = [f"CI check `{check.get('name')}` {check.get('conclusion')} on the pull request"
                 + (f" ({check['html_url']})" if check.get("html_url") else "") + "."]
        for part in (output.get("title"), output.get("summary"), output.get("text")):
            if isinstance(part, str) and part.strip():
                lines.append(part.strip())
        log = _job_log(gh, check, logs)
        if log:
            lines.append("The end of its log:\n" + log)
        items.append((f"check:{check.get('id')}", "\n".join(lines), f"CI `{check.get('name')}`"))
    status = _dict(gh.get(f"/commits/{sha}/status", f"the statuses of {sha[:10]}", missing_ok=True))
    for st in _list(status.get("statuses")):
        if isinstance(st, dict) and st.get("state") in FAILED_STATES:
            text = (f"CI status `{st.get('context')}` {st.get('state')} on the pull request"
                    + (f": {st['description']}" if st.get("description") else "")
                    + (f" ({st['target_url']})" if st.get("target_url") else "") + ".")
            items.append((f"status:{st.get('context')}@{sha}", text, f"CI `{st.get('context')}`"))
    return items


def _job_log(gh: GitHubClient, check: dict[str, Any], logs: JobLogs) -> str:
    """The tail of a GitHub Actions job's log (its check run's id is the job's), or "": kept
    once downloaded (`logs`), so a sync that reads the check again does not download it again."""
    if _dict(check.get("app")).get("slug") != "github-actions" or not check.get("id"):
        return ""
    key = job_key(check)
    kept = logs.get(key)
    if kept is not None:
        return kept
    resp = gh.request("GET", gh.url(f"/actions/jobs/{check['id']}/logs"))
    if resp.status_code in (301, 302, 307, 308) and resp.headers.get("Location"):
        import httpx  # the log is served from storage outside the API: no token goes there

        resp = httpx.get(resp.headers["Location"], timeout=30)
    if resp.status_code != 200:
        return ""
    text = resp.text
    tail = text[-LOG_TAIL_CHARS:] if len(text) > LOG_TAIL_CHARS else text
    logs.put(key, tail)  # (a log not there yet, a 404, is asked for again next time)
    return tail


def _changes_requested(gh: GitHubClient, number: str) -> list[tuple[str, str, str]]:
    """(signal key, text, who) for each review that requests changes, with its inline comments."""
    reviews = gh.get_all(f"/pulls/{number}/reviews", {"per_page": 100}, f"the reviews of pull request #{number}")
    wanted = [r for r in reviews if isinstance(r, dict) and r.get("state") == "CHANGES_REQUESTED"]
    if not wanted:
        return []
    comments = gh.get_all(f"/pulls/{number}/comments", {"per_page": 100},
                          f"the review comments of pull request #{number}")
    items = []
    for review in wanted:
        who = _dict(review.get("user")).get("login") or "a reviewer"
        body = review.get("body")
        lines = [f"Review by {who} requests changes:" + (f" {body.strip()}" if isinstance(body, str) and body else "")]
        for c in comments:
            if isinstance(c, dict) and c.get("pull_request_review_id") == review.get("id"):
                where = f"{c.get('path')}:{c.get('line') or c.get('original_line') or '?'}"
                lines.append(f"- {where}: {str(c.get('body') or '').strip()}")
        items.append((f"review:{review.get('id')}", "\n".join(lines), f"review by {who}"))
    return items


def act_on_signals(orch: Any, config: Config, signals: list[PullSignals], say: Callable[[str], None]) -> list[Any]:
    """Start a review round for each followed ticket whose pull request asks for changes
    (`read_signals`; each signal once, at most `[github] auto_rounds` rounds a pull request),
    labelled by what asked (`PullSignals.by`), and run it here; the rounds' outcomes. A round
    that completes has its commits pushed to the pull request (github.plugin); one that fails
    leaves the pull request followed (github.pulls.FOLLOWED): its next signal starts a round."""
    from tickets.pull_signals import PullAsks, SignalsTaken
    from tickets.rounds import STORED

    store, cap = orch.store, config.github.auto_rounds
    outcomes = []
    for found in signals:
        keys = [key for key, _, _ in found.items]
        if store.auto_rounds(found.ticket_id, found.pr_url) >= cap:
            if store.mark_signals(found.ticket_id, found.pr_url, keys, None):
                say(f"pull request {found.pr_url} of {found.ticket_id} asks for changes again, after the "
                    f"{cap} round(s) it may start by itself ([github] auto_rounds): waiting for a person, "
                    f"`middle feedback {found.ticket_id} \"...\"`")
            continue
        # The signals are recorded as acted on in the transaction that opens their round (or
        # stores them for the run going on): recorded first, a kill before the round lost them.
        say(f"pull request {found.pr_url} of {found.ticket_id} asks for changes ({len(found.items)} thing(s), from "
            f"{found.by.split(': ', 1)[-1]}): a review round starts with them")
        try:
            outcome = orch.feedback(found.ticket_id, found.feedback, by=found.by,
                                    asks=PullAsks(found.pr_url, tuple(keys)))
        except SignalsTaken:
            say("(another process took them first: its round acts on them)")
            continue
        point("pr.signals")
        if outcome.status == STORED:  # a run of it was going on: its next assess reads them
            continue
        outcomes.append(outcome)  # (a complete round's commits went to the pull request: github.plugin)
    return outcomes
