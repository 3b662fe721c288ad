"""kill -9 at every named point of a run (orchestrator.killpoints), then a takeover on
another machine: nothing lost, nothing duplicated.

Machine A is a real process with MIDDLE_KILL_AT=<point>:<n>: it kills itself (SIGKILL) the n-th
time its run passes that point. Machine B is this process: its own clone and state, another
MIDDLE_HOSTNAME, the team's PostgreSQL store and memory. The ticket takes two turns (a.txt, then
b.txt), a check, a commit and a memory doc, so a run visits every point.

The points come from the code (POINTS); CI runs a handful covering each kind (a store write, the
work in progress, a checkpoint, the branch, memory, the check baseline, the end), and
`pytest -m killsweep tests/graph/test_killpoints.py` visits every one (the table in docs/runs.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_wip import _after_the_lease, _env

from orchestrator.config.settings import Config
from orchestrator.killpoints import POINTS, VARIABLE
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing.fakes import RecordingCodingAgent, decision_reply, plan_reply
from orchestrator.workspace.git import git, out

pytestmark = [pytest.mark.postgres]

TICKET = "---\ntitle: Two files\nproject: calc\nid: t1\n---\nCreate a.txt, then b.txt.\n"
LEASE_S = 2.0
FILES = {"a.txt": "a\n", "b.txt": "b\n"}

ROUND_A = r"""
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_killpoints import machine
with machine(Path({home!r}), Path({remote!r}), {pg_url!r}) as orch:
    orch.sync_tickets()
    assert orch.run_ticket("t1").status == "complete"
    orch.feedback("t1", "Also c.txt")
"""

MACHINE_A = r"""
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_killpoints import machine
with machine(Path({home!r}), Path({remote!r}), {pg_url!r}, max_turns={max_turns!r}, memory={memory!r}) as orch:
    orch.sync_tickets()
    orch.run_ticket("t1")
"""


class TwoTurnsLLM:
    """The middle agent wherever a run resumes: a plan; "go on with b.txt" until Claude Code has
    said it wrote b.txt, then "complete"."""

    def complete(self, system: str, messages: list[dict[str, str]], schema: Any) -> str:
        if schema.__name__ == "Plan":  # (a review round asking for c.txt: tests below)
            return plan_reply("Create c.txt" if "Also c.txt" in json.dumps(messages) else "Create a.txt")
        said = json.dumps(messages)
        if "Wrote b.txt" in said:
            return decision_reply(True, "Created a.txt and b.txt.")
        return decision_reply(False, next_prompt="Now b.txt")


def _coder(calls: Path) -> RecordingCodingAgent:
    """Claude Code: writes the file its prompt asks for, and logs the call (both machines append
    to one file: the test counts how often each turn ran)."""

    def turn(prompt: str, cwd: str) -> str:
        name = "b.txt" if "Now b.txt" in prompt else "c.txt" if "Create c.txt" in prompt else "a.txt"
        (Path(cwd) / name).write_text(FILES.get(name, "c\n"))
        with open(calls, "a") as f:
            f.write(name + "\n")
        return f"Wrote {name}."

    return RecordingCodingAgent([turn] * 6)


def machine(home: Path, remote: Path, pg_url: str, max_turns: int = 4,
            memory: dict[str, Any] | None = None) -> Orchestrator:
    """One machine of the team: its own clone of `remote`, ticket folder and state; the team's
    PostgreSQL store, checkpoints and memory (bm25, whose store is in the same database).
    `max_turns=1`: the ticket fails at its turn limit after turn 1 (the fail path); `memory`:
    another `[memory]` (tests/graph/test_observe_killed.py: a conversation-watching backend)."""
    if not (home / "repo").exists():
        git(home.parent, "clone", "--quiet", str(remote), str(home / "repo"))
        (home / "tickets").mkdir()
        (home / "tickets" / "t1.md").write_text(TICKET)
    cfg = Config(root=home, state_dir=str(home / "state"), store={"url": pg_url},
                 project={"path": "repo", "tickets_dir": "tickets", "repo_url": str(remote), "base_branch": "main"},
                 agent={"max_turns": max_turns, "max_cost_usd": 5.0}, run={"lease_s": LEASE_S},
                 check={"commands": ["test -f README.md"]},
                 memory=memory or {"save_dir": str(home / "memory"), "backend": "bm25"})
    return Orchestrator(cfg, llm=TwoTurnsLLM(), coding_agent=_coder(home.parent / "calls.log"),
                        project_override=str(home / "repo"))


def machine_a_dies_at(tmp_path: Path, remote: Path, pg_url: str, at: str, max_turns: int = 4,
                      memory: dict[str, Any] | None = None) -> bool:
    """Run machine A with MIDDLE_KILL_AT=`at`; True when it died there (SIGKILL), False when
    its run ended without passing that point so often."""
    script = MACHINE_A.format(tests=str(Path(__file__).parent), home=str(tmp_path / "a"), remote=str(remote),
                              pg_url=pg_url, max_turns=max_turns, memory=memory)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                          env={**_env(), "MIDDLE_HOSTNAME": "machine-a", VARIABLE: at})
    assert proc.returncode in (0, -9), proc.stderr[-3000:]
    return proc.returncode == -9


def take_over_and_check(tmp_path: Path, remote: Path, pg_url: str, monkeypatch: Any,
                        memory: dict[str, Any] | None = None) -> dict[str, Any]:
    """Machine B continues the run; everything the sweep promises is asserted. What B did, for
    the table."""
    _after_the_lease(pg_url)
    monkeypatch.setenv("MIDDLE_HOSTNAME", "machine-b")
    monkeypatch.delenv(VARIABLE, raising=False)
    with machine(tmp_path / "b", remote, pg_url, memory=memory) as orch:
        if orch.store.get_ticket("t1").status.value == "complete":  # A died after its run's end
            ended = orch.store.latest_run("t1")
            assert ended is not None
            outcome_status, commit = "complete", ended["head_commit"]
        else:
            outcome = orch.resume("t1")
            outcome_status, commit = outcome.status, outcome.commit
        runs = orch.store.list_runs("t1")
        run_id = runs[0]["id"]
        events = orch.store.list_events(run_id=run_id, limit=1_000_000)
        turns = orch.store.list_turns(run_id=run_id)
        kept = orch.store.memory_docs("t1")
        indexed = orch.memory.list_docs("calc") if orch.memory is not None else []
        view = orch.memory.conversation_context("calc", f"run-{run_id}") if orch.memory is not None else None
    assert outcome_status == "complete", (outcome_status, [e for e in events if e["kind"] == "run_end"])
    # Once: one run, one end, one run_start per attempt at most (A's and B's).
    kinds = [e["kind"] for e in events]
    assert len(runs) == 1 and kinds.count("run_end") == 1 and kinds.count("run_start") <= 2, kinds
    # Every file of every finished turn is in the commit on the shared repository.
    assert commit and out(remote, "rev-parse", "refs/heads/middle/t1") == commit
    for name, text in FILES.items():
        assert out(remote, "show", f"middle/t1:{name}") == text.strip(), name
    assert git(remote, "rev-parse", "--verify", "--quiet", "refs/middle/wip/t1", check=False).returncode != 0
    # Each turn stored once, done; each turn's end and assessment recorded once.
    assert [(t["turn_no"], t["status"]) for t in turns] == [(1, "done"), (2, "done")]
    for n in (1, 2):
        ends = [e for e in events if e["data"].get("node") == "work" and e["data"].get("phase") == "end"
                and e["data"].get("turn") == n]
        assert len(ends) == 1, (n, ends)
    assessed = [e["data"]["decision"]["complete"] for e in events if e["kind"] == "decision"]
    assert assessed == [False, True], assessed
    # One completion doc, kept once and indexed once.
    assert len(kept) == 1 and sum(doc == kept[0] for doc in indexed) == 1, (kept, indexed)
    calls = (tmp_path / "calls.log").read_text().split()
    # A turn runs again only when A died inside it before its work was saved where B finds it.
    assert calls.count("a.txt") <= 2 and calls.count("b.txt") <= 2, calls
    return {"calls": calls, "conversation": list(view.gap_messages) if view is not None else [],
            "indexed": indexed}


# One point of each kind beyond the three the tests below name (a store write of the turn, the
# work in progress, the run's end): a checkpoint, the branch, memory, the check baseline.
CI_POINTS = ("checkpoint.put", "branch.pushed", "memory.indexed", "check.baseline")
NAMED = ("turn.finished:1", "wip.pushed:1", "run.ended:1")  # the tests below
RUN_POINTS = [p.name for p in POINTS if p.in_run]
CI_CASES = [f"{name}:1" for name in CI_POINTS]
SWEEP_CASES = [f"{name}:{n}" for name in RUN_POINTS for n in (1, 2)]  # every point, its first and second pass


def test_the_ci_cases_are_points_of_the_code():
    assert set(CI_POINTS) <= set(RUN_POINTS) and {c.split(":")[0] for c in NAMED} <= set(RUN_POINTS)


@pytest.mark.slow
@pytest.mark.parametrize("at", CI_CASES)
def test_killed_at_a_point_the_takeover_loses_and_repeats_nothing(at, tmp_path, team, pg_url, monkeypatch):
    assert machine_a_dies_at(tmp_path, team, pg_url, at), f"machine A's run never passed {at}"
    take_over_and_check(tmp_path, team, pg_url, monkeypatch)


@pytest.mark.killsweep
@pytest.mark.parametrize("at", SWEEP_CASES)
def test_sweep_every_point(at, tmp_path, team, pg_url, monkeypatch, record_property):
    if not machine_a_dies_at(tmp_path, team, pg_url, at):
        record_property("outcome", "not visited")
        pytest.skip(f"a run passes {at.split(':')[0]} fewer than {at.split(':')[1]} time(s)")
    done = take_over_and_check(tmp_path, team, pg_url, monkeypatch)
    record_property("outcome", f"complete once; turns run {len(done['calls'])}")


@pytest.mark.slow
def test_killed_right_after_the_turn_is_stored_the_takeover_commits_its_file(tmp_path, team, pg_url,
                                                                             monkeypatch):
    """The gap of issue 37: a turn marked done in the store before its work was saved. Now its
    work is pushed before it is marked done: B restores it, does not run the turn again, and the
    commit holds its file."""
    assert machine_a_dies_at(tmp_path, team, pg_url, "turn.finished:1")
    assert out(team, "show", "refs/middle/wip/t1:a.txt") == "a"  # pushed before the turn was done
    done = take_over_and_check(tmp_path, team, pg_url, monkeypatch)
    assert done["calls"] == ["a.txt", "b.txt"]  # turn 1 ran on A only, turn 2 on B


@pytest.mark.slow
def test_killed_after_the_work_was_pushed_but_before_the_turn_was_stored_it_is_not_run_again(
        tmp_path, team, pg_url, monkeypatch):
    """The turn's result travels with its work in progress: B finds turn 1 finished there and
    stores it instead of running Claude Code again."""
    assert machine_a_dies_at(tmp_path, team, pg_url, "wip.pushed:1")
    done = take_over_and_check(tmp_path, team, pg_url, monkeypatch)
    assert done["calls"] == ["a.txt", "b.txt"]


def test_every_point_named_in_the_code_is_in_the_list_and_every_listed_point_is_called():
    """The list is the code's: each `point("...")` call names a listed point, and each listed
    point is called somewhere."""
    import re

    root = Path(__file__).resolve().parents[2]
    called: set[str] = set()
    for path in list((root / "orchestrator").rglob("*.py")):
        called |= set(re.findall(r"\bpoint\(\"([a-z_.]+)\"\)", path.read_text(encoding="utf-8")))
    assert called == {p.name for p in POINTS}


def test_a_mistyped_kill_point_is_one_error(tmp_path):
    proc = subprocess.run([sys.executable, "-c", "from orchestrator.killpoints import point\n"
                           "point('run.fields')"], capture_output=True, text=True,
                          env={**os.environ, VARIABLE: "wip.pushd:1"})
    assert proc.returncode != 0 and "names no kill point" in proc.stderr


@pytest.mark.slow
def test_killed_just_after_the_runs_end_a_resume_writes_no_second_start_or_end(tmp_path, team, pg_url,
                                                                               monkeypatch):
    from orchestrator.errors import TicketError

    assert machine_a_dies_at(tmp_path, team, pg_url, "run.ended:1")
    monkeypatch.setenv("MIDDLE_HOSTNAME", "machine-b")
    with machine(tmp_path / "b", team, pg_url) as orch:
        with pytest.raises(TicketError, match="already ended"):
            orch.resume("t1")
        events = orch.store.list_events(ticket_id="t1", limit=1_000_000)
        assert orch.store.get_ticket("t1").status.value == "complete"
    kinds = [e["kind"] for e in events]
    assert kinds.count("run_start") == 1 and kinds.count("run_end") == 1
    take_over_and_check(tmp_path, team, pg_url, monkeypatch)  # and nothing of it is lost


# The fail path: a turn limit after turn 1 ends the run failed, its work committed on the branch
# (orchestrator.graph.keep_work: a commit, a push, the work in progress dropped, the end).
FAIL_POINTS = ("run.fields", "turn.started", "wip.committed", "wip.pushed", "turn.finished", "memory.observed",
               "turn.assessed", "event.written", "checkpoint.put", "check.baseline", "branch.committed",
               "branch.pushed", "wip.dropped", "run.ended", "run.hooks", "run.hooks_recorded")
FAIL_CI = "run.ended:1"  # the case a kill exposed (the test below)
# every point's first pass, and the second of those a failing run passes more than once
FAIL_SWEEP = [f"{name}:1" for name in FAIL_POINTS] + [f"{name}:2" for name in ("run.fields", "event.written",
                                                                                "checkpoint.put")]


def take_over_the_failure_and_resume(tmp_path: Path, remote: Path, pg_url: str, monkeypatch: Any) -> dict[str, Any]:
    """Machine B takes the run over (same limit): it fails once, its work kept on the branch;
    then, the limit raised, `middle resume` asks the middle agent again and the ticket completes.
    Everything the sweep promises is asserted; what B did, for the table."""
    _after_the_lease(pg_url)
    monkeypatch.setenv("MIDDLE_HOSTNAME", "machine-b")
    monkeypatch.delenv(VARIABLE, raising=False)
    with machine(tmp_path / "b", remote, pg_url, max_turns=1) as orch:
        run = orch.store.latest_run("t1")
        assert run is not None
        if not (run["status"] == "failed" and orch.store.run_end_data(run["id"]) is not None):
            outcome = orch.resume("t1")  # A died before its run's end was stored
            assert outcome.status == "failed", (outcome.status, outcome.reason)
        run = orch.store.latest_run("t1")
        assert run is not None
        end = orch.store.run_end_data(run["id"]) or {}
        events = orch.store.list_events(run_id=run["id"], limit=1_000_000)
        turns = orch.store.list_turns(run_id=run["id"])
    kinds = [e["kind"] for e in events]
    assert run["status"] == "failed" and "turn limit reached" in (run["reason"] or ""), (run["status"], run["reason"])
    assert end.get("kept_work") and kinds.count("run_end") == 1, (end, kinds)
    assert out(remote, "show", "middle/t1:a.txt") == "a"  # the failed run's work, kept on the branch
    assert git(remote, "rev-parse", "--verify", "--quiet", "refs/middle/wip/t1", check=False).returncode != 0
    assert [(t["turn_no"], t["status"]) for t in turns] == [(1, "done")]
    with machine(tmp_path / "b", remote, pg_url, max_turns=4) as orch:  # the limit raised
        outcome = orch.resume("t1")
        events = orch.store.list_events(run_id=run["id"], limit=1_000_000)
        turns = orch.store.list_turns(run_id=run["id"])
    assert outcome.status == "complete", (outcome.status, outcome.reason)
    kinds = [e["kind"] for e in events]
    assert kinds.count("run_end") == 2, kinds  # the failure's, then the completion's
    for name, text in FILES.items():
        assert out(remote, "show", f"middle/t1:{name}") == text.strip(), name
    assert [(t["turn_no"], t["status"]) for t in turns] == [(1, "done"), (2, "done")]
    calls = (tmp_path / "calls.log").read_text().split()
    assert calls.count("a.txt") <= 2 and calls.count("b.txt") == 1, calls
    return {"calls": calls}


@pytest.mark.slow
def test_a_failed_run_killed_just_after_its_end_is_resumed_by_asking_the_middle_agent_again(
        tmp_path, team, pg_url, monkeypatch):
    """A kill between the failed run's end and the checkpoint after `fail` left the graph before
    `fail`: `middle resume` (the limit raised) ran `fail` again, ending the run a second time
    ("failed") instead of asking the middle agent again."""
    assert machine_a_dies_at(tmp_path, team, pg_url, FAIL_CI, max_turns=1)
    done = take_over_the_failure_and_resume(tmp_path, team, pg_url, monkeypatch)
    assert done["calls"] == ["a.txt", "b.txt"]


@pytest.mark.killsweep
@pytest.mark.parametrize("at", FAIL_SWEEP)
def test_sweep_every_point_of_the_fail_path(at, tmp_path, team, pg_url, monkeypatch, record_property):
    if not machine_a_dies_at(tmp_path, team, pg_url, at, max_turns=1):
        record_property("outcome", "not visited")
        pytest.skip(f"a failing run passes {at.split(':')[0]} fewer than {at.split(':')[1]} time(s)")
    done = take_over_the_failure_and_resume(tmp_path, team, pg_url, monkeypatch)
    record_property("outcome", f"failed once, then complete; turns run {len(done['calls'])}")


def test_the_fail_path_cases_are_points_of_the_code():
    assert set(FAIL_POINTS) <= set(RUN_POINTS)


@pytest.mark.slow
def test_a_round_killed_after_deleting_the_earlier_docs_from_memory_retires_them_on_takeover(
        tmp_path, team, pg_url, monkeypatch):
    """A review round indexes its doc, deletes the ticket's earlier doc from memory, then marks it
    retired in the store (memory.retired between): killed there, B runs index_summary again (the
    delete finds nothing) and marks it, so the store never lists a doc memory no longer holds."""
    script = ROUND_A.format(tests=str(Path(__file__).parent), home=str(tmp_path / "a"), remote=str(team),
                            pg_url=pg_url)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                          env={**_env(), "MIDDLE_HOSTNAME": "machine-a", VARIABLE: "memory.retired:1"})
    assert proc.returncode == -9, proc.stderr[-3000:]
    _after_the_lease(pg_url)
    monkeypatch.setenv("MIDDLE_HOSTNAME", "machine-b")
    monkeypatch.delenv(VARIABLE, raising=False)
    with machine(tmp_path / "b", team, pg_url) as orch:
        assert orch.resume("t1").status == "complete"
        runs = orch.store.list_runs("t1")
        events = orch.store.list_events(run_id=runs[-1]["id"], limit=1_000_000)
        kept = orch.store.memory_docs("t1")
        indexed = orch.memory.list_docs("calc") if orch.memory is not None else []
    assert len(runs) == 2 and [e["kind"] for e in events].count("run_end") == 1
    assert len(kept) == 1 and "Round 2" in kept[0], kept  # the earlier doc retired in the store...
    assert indexed == kept  # ...and gone from memory; this round's doc indexed once
    assert out(team, "show", "middle/t1:c.txt") == "c"
