"""kill -9 at the start of every step of a run on machine A, then a takeover on machine B (its
own clone and state, another MIDDLE_HOSTNAME, the team's PostgreSQL store): the ticket completes
once, with its commit on the shared repository, and no finished turn runs again. (Apart from
test_wip.py so the two modules' slow machines run side by side.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_wip import _after_the_lease, _machine_a_dies, machine

from orchestrator.testing.fakes import RecordingCodingAgent, decision_reply, plan_reply
from orchestrator.workspace.git import out

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


class AnyStepLLM:
    """The middle agent wherever a run resumes: a plan, then "complete"."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def complete(self, system: str, messages: list[dict[str, str]], schema: Any) -> str:
        self.calls.append(schema.__name__)
        if schema.__name__ == "Plan":
            return plan_reply("Create a.txt")
        return decision_reply(True, "Created a.txt.")


STEPS = ["load_ticket", "prepare", "recall_start", "plan", "work", "recall_turn", "assess", "check", "commit",
         "index_summary", "finalize"]


@pytest.mark.parametrize("step", STEPS)
def test_killed_at_any_step_the_ticket_completes_once_with_its_commit_on_another_host(step, tmp_path, team,
                                                                                       pg_url, monkeypatch):
    _machine_a_dies(tmp_path, team, pg_url, f"node {step}")
    _after_the_lease(pg_url)
    monkeypatch.setenv("MIDDLE_HOSTNAME", "machine-b")

    def turn(prompt, cwd):
        (Path(cwd) / "a.txt").write_text("a\n")
        return "Wrote a.txt."

    coder = RecordingCodingAgent([turn])
    with machine(tmp_path / "b", team, pg_url, AnyStepLLM(), coder) as orch:
        outcome = orch.resume("t1")
        assert outcome.status == "complete", outcome
        runs = orch.store.list_runs("t1")
        events = orch.store.list_events(run_id=runs[0]["id"])
        turns = orch.store.list_turns(run_id=runs[0]["id"])
    assert len(runs) == 1 and [e["kind"] for e in events].count("run_end") == 1
    # A turn A finished is not run again on B; one A never finished runs there once.
    assert [t["status"] for t in turns] == ["done"]
    assert len(coder.calls) == (1 if STEPS.index(step) <= STEPS.index("work") else 0)
    assert out(team, "rev-parse", "refs/heads/middle/t1") == outcome.commit
    assert out(team, "show", "middle/t1:a.txt") == "a"
