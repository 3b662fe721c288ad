"""kill -9 of `middle feedback` just after the review round's end was stored, before its open pull
request was brought up to date (orchestrator.killpoints: run.hooks; the project pushes to
`origin`, so only the pull request's owner pushes the branch), with the fake GitHub, the real
Claude Code CLI on the fake Messages API and a real SQLite store: the next `middle sync` pushes
the round's commit to the pull request and rewrites its description, once."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_pull_request_updates import PR, _create, _remote_head, invoke, project  # noqa: F401  (the fixture)

from orchestrator.killpoints import VARIABLE
from orchestrator.workspace.git import out

pytestmark = [pytest.mark.cli, pytest.mark.slow]


def test_a_round_killed_after_its_end_has_its_pull_request_brought_up_to_date_by_the_next_sync(
        project, github, claude_cli):  # noqa: F811
    """Before, nothing but a person's `middle pr` did it: the pull request kept the earlier
    round's commit and description (its CI and reviews judging work the ticket had moved past)."""
    before = _remote_head(project)
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "feedback", "gh-1", _create("extra.py", 1),
                           "--fake"], cwd=project, capture_output=True, text=True, timeout=180,
                          env={**os.environ, VARIABLE: "run.hooks:1"})
    assert proc.returncode == -9, proc.stdout[-2000:] + proc.stderr[-2000:]
    head = out(project / "repo", "rev-parse", "middle/gh-1")
    assert head != before and _remote_head(project) == before  # the round's end is stored; its PR is behind
    assert not github.requests_to("/repos/me/app/pulls/2", "PATCH")
    result = invoke("sync", "--from", "github:me/app", "--fake")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"updated pull request {PR} of gh-1: pushed middle/gh-1 ({head[:10]}) and rewrote its description" in said
    assert _remote_head(project) == head
    assert "`extra.py`" in github.repos["me/app"].pulls[2]["body"]
    again = invoke("sync", "--from", "github:me/app", "--fake")  # up to date: nothing more
    assert again.exit_code == 0 and "updated pull request" not in again.output, again.output
    assert len(github.requests_to("/repos/me/app/pulls/2", "PATCH")) == 1
