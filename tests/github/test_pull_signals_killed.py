"""kill -9 of `middle sync` just after the review round a pull request's failed check asked for
ended (orchestrator.killpoints: pr.signals), with the fake GitHub, the real Claude Code CLI on the
fake Messages API and a real SQLite store: the signals it acted on are recorded with that round
(counted against `[github] auto_rounds`), and the next sync acts on nothing again."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_pull_request_rounds import PR, invoke, project, store  # noqa: F401  (project: the fixture)

from orchestrator.killpoints import VARIABLE
from orchestrator.workspace.git import out

pytestmark = [pytest.mark.cli, pytest.mark.slow]


def test_a_sync_killed_after_a_round_a_failed_check_started_has_it_recorded_once(project, github,  # noqa: F811
                                                                                 claude_cli):
    """Before, the signals were recorded taken (with no round) in one write, the round claimed in a
    later one, and the round recorded on them after it ended: a kill after the first write lost
    the failed check (no round, and no later sync acted on it), a kill after the round left it
    uncounted against `[github] auto_rounds`. Now they are recorded in the round's claim."""
    head = out(project / "repo", "rev-parse", "middle/gh-1")
    github.add_check_run("me/app", head, "tests", "failure", summary="1 failed, 3 passed")
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "sync", "--from", "github:me/app", "--fake"],
                          cwd=project, capture_output=True, text=True, timeout=180,
                          env={**os.environ, VARIABLE: "pr.signals:1"})
    assert proc.returncode == -9, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"pull request {PR} of gh-1 asks for changes (1 thing(s), from CI `tests`)" in " ".join(
        proc.stdout.split())
    with store(project) as s:
        runs = s.list_runs("gh-1")
        assert [s.round_of(r["id"]) for r in runs] == [1, 2]
        assert "CI check `tests` failure" in s.feedback(runs[1]["id"])[0]["text"]
        assert s.auto_rounds("gh-1", PR) == 1  # the round is counted against [github] auto_rounds
    again = invoke("sync", "--from", "github:me/app", "--fake")  # acted on once
    assert again.exit_code == 0 and "asks for changes" not in again.output, again.output
    with store(project) as s:
        assert len(s.list_runs("gh-1")) == 2
