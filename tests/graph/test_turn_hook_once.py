"""on_turn_end once per turn across kills outside the `turn.hooked` window: a takeover that finds a
turn finished calls its hook, records it (turns.hooked), then saves the turn's work in progress
before the work node's checkpoint. Killed there (`wip.committed`, the point after `turn.hooked` in
a takeover's work node), the next takeover runs the work node again and must not call the hook a
second time. Before turns.hooked (commit f279808), it did: the per-(run_id, turn) count was 2.

Three real processes (SQLite store, the real graph), each killing itself (SIGKILL): A after turn
1's result was stored and before its hook (`memory.observed`), B (the takeover) after the hook
and its record, at its work-in-progress save; then the resume here completes the ticket."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from test_turn_hook_killed import machine, machine_a_dies_at
from test_wip import _env

from orchestrator.killpoints import VARIABLE

MACHINE_B = r"""
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_turn_hook_killed import machine
with machine(Path({home!r}), Path({project!r})) as orch:
    orch.resume("t1")
"""


def _turn_hooks(home: Path) -> Counter[tuple[str, str]]:
    """How many times on_turn_end was called per (run_id, turn_no)."""
    lines = (home / "hooks.log").read_text().split("\n")[:-1] if (home / "hooks.log").exists() else []
    return Counter((line.split()[0], line.split()[1]) for line in lines if line.split()[1].isdigit())


def test_a_takeover_killed_after_a_turns_hook_and_its_record_does_not_call_it_again(tmp_path, project):
    machine_a_dies_at("memory.observed:1", tmp_path, project)
    assert _turn_hooks(tmp_path) == Counter()  # turn 1 finished, its hook not called yet
    script = MACHINE_B.format(tests=str(Path(__file__).parent), home=str(tmp_path), project=str(project))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**_env(), VARIABLE: "wip.committed:1"})
    assert proc.returncode == -9, proc.stderr[-3000:]
    called = _turn_hooks(tmp_path)
    assert [turn for _run, turn in called] == ["1"] and set(called.values()) == {1}, called  # B: turn 1's hook
    with machine(tmp_path, project) as orch:
        assert orch.resume("t1").status == "complete"
        run_id = orch.store.latest_run("t1")["id"]
    assert _turn_hooks(tmp_path) == Counter({(run_id, "1"): 1, (run_id, "2"): 1})
