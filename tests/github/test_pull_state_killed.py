"""kill -9 of `middle sync` just after it recorded that GitHub merged or closed a ticket's pull
request (orchestrator.killpoints: pr.read), with the fake GitHub and a real SQLite store: the
ticket is marked merged (or discarded) all the same, and the next sync changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_pull_requests import invoke, project  # noqa: F401  (the fixture)

from orchestrator.killpoints import VARIABLE
from tickets.model import TicketStatus
from tickets.store import TicketStore


@pytest.mark.parametrize("state, status", [("merged", TicketStatus.MERGED),
                                           pytest.param("closed", TicketStatus.DISCARDED,
                                                        marks=pytest.mark.killsweep)])
def test_a_sync_killed_after_reading_a_merged_pull_request_leaves_the_ticket_marked(project, github,  # noqa: F811
                                                                                    state, status):
    """Before, the run's pr_state was written first and the ticket's status in a second write: a
    kill between left pr_state "merged" on a ticket still complete, and no later sync read its
    pull request again (it follows only pull requests whose pr_state is "open")."""
    assert invoke("pr", "gh-1").exit_code == 0
    github.set_pull_state("me/app", 2, state)
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "sync", "--from", "github:me/app"],
                          cwd=project, capture_output=True, text=True, timeout=60,
                          env={**os.environ, VARIABLE: "pr.read:1"})
    assert proc.returncode == -9, proc.stdout[-2000:] + proc.stderr[-2000:]
    again = invoke("sync", "--from", "github:me/app")
    assert again.exit_code == 0, again.output
    with TicketStore(project / ".middle" / "middle.sqlite3") as store:
        assert store.get_ticket("gh-1").status is status
        assert store.latest_run("gh-1")["pr_state"] == state
        assert store.get_ticket("gh-1").status_reason == (
            f"pull request https://github.example/me/app/pull/2 was "
            f"{'merged' if state == 'merged' else 'closed unmerged'} on GitHub")
