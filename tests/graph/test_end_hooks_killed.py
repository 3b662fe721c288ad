"""kill -9 between a run's stored end and its plugins' end hooks (`run.hooks`), or between one
plugin's end hook and its record (`run.hooked`), then `middle sync`'s catch-up: each plugin's
on_ticket_complete runs once, except the one a kill cut off between its hook and its record,
which runs again with the same run_id (the key a plugin dedupes on, docs/hooks.md).

Machine A is a real process (SQLite store, the real graph) that kills itself (SIGKILL) at the
point; the catch-up (orchestrator.lifecycle.run_lifecycle.catch_up_end_hooks, what `middle sync`
calls) runs here with the same plugins."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_turn_hook_killed import machine, machine_a_dies_at

from orchestrator.lifecycle.run_lifecycle import RunLifecycle, catch_up_end_hooks


def _ends_after_catch_up(tmp_path: Path, project: Path, ended_just_now: bool = True) -> tuple[list[str], str, int]:
    said: list[str] = []
    with machine(tmp_path, project) as orch:
        lifecycle = RunLifecycle(orch.store, orch.registry.hook, orch.config)
        if ended_just_now:  # (its process may be running its hooks still: the catch-up waits a lease)
            assert catch_up_end_hooks(lifecycle, said.append) == 0
        caught = catch_up_end_hooks(lifecycle, said.append, ended_s_ago=0.0)
        assert catch_up_end_hooks(lifecycle, said.append, ended_s_ago=0.0) == 0  # once done, nothing is due
        run_id = orch.store.latest_run("t1")["id"]
    ends = [line for line in (tmp_path / "hooks.log").read_text().split("\n")[:-1]
            if line.split()[1] in ("complete", "failed")]
    return ends, run_id, caught


def test_end_hooks_a_kill_skipped_are_run_once_by_sync(tmp_path, project):
    machine_a_dies_at("run.hooks:1", tmp_path, project)
    assert not [line for line in (tmp_path / "hooks.log").read_text().split("\n") if "complete" in line]
    ends, run_id, caught = _ends_after_catch_up(tmp_path, project)
    assert caught == 1 and ends == [f"{run_id} complete done"], ends


@pytest.mark.parametrize("at", ["run.hooked:1"])
def test_a_kill_between_an_end_hook_and_its_record_repeats_that_hook_with_its_run_id(at, tmp_path, project):
    machine_a_dies_at(at, tmp_path, project)
    ends, run_id, caught = _ends_after_catch_up(tmp_path, project)
    assert caught == 1 and ends == [f"{run_id} complete done"] * 2, ends


def test_a_run_whose_end_hooks_all_ran_is_not_due(tmp_path, project):
    with machine(tmp_path, project) as orch:
        assert orch.run_ticket("t1").status == "complete"
        assert orch.store.hooks_due() == []
    ends, _run_id, caught = _ends_after_catch_up(tmp_path, project, ended_just_now=False)
    assert caught == 0 and len(ends) == 1, ends


def test_a_failed_runs_end_hook_a_kill_skipped_is_run_once_by_sync_with_its_reason(tmp_path, project):
    machine_a_dies_at("run.hooks:1", tmp_path, project, max_turns=1)
    ends, run_id, caught = _ends_after_catch_up(tmp_path, project)
    assert caught == 1 and len(ends) == 1 and ends[0].startswith(f"{run_id} failed "), ends
    assert "turn" in ends[0]  # the run's stored reason (its turn limit)


def test_a_kill_after_every_end_hook_was_recorded_leaves_the_catch_up_only_the_clear(tmp_path, project):
    """`run.hooks_recorded`: each plugin's end hook ran and was recorded, hooks_due not cleared.
    The catch-up runs none of them again, says nothing, and clears it."""
    machine_a_dies_at("run.hooks_recorded:1", tmp_path, project)
    said: list[str] = []
    with machine(tmp_path, project) as orch:
        assert [hook for _t, _r, hook in orch.store.hooks_due()] == ["on_ticket_complete"]
        lifecycle = RunLifecycle(orch.store, orch.registry.hook, orch.config)
        assert catch_up_end_hooks(lifecycle, said.append, ended_s_ago=0.0) == 1  # (one run was due)
        assert orch.store.hooks_due() == [] and said == []  # none ran: nothing said
        run_id = orch.store.latest_run("t1")["id"]
    ends = [line for line in (tmp_path / "hooks.log").read_text().split("\n")[:-1] if "complete" in line]
    assert ends == [f"{run_id} complete done"], ends
