"""The record of which plugins' end hooks ran (table end_hooks) is keyed so that the next process
finds it: a plugin registered in code without a name (pluggy names it by its object's id, another
in every process) and two plugins of one class. Machine A (a real process, the real graph, SQLite)
kills itself (SIGKILL) between one plugin's end hook and its record (`run.hooked`); the catch-up
(`middle sync`'s, orchestrator.lifecycle.run_lifecycle.catch_up_end_hooks) runs here with the same
plugins, built the same way. Each plugin's on_ticket_complete runs once, except the one the kill
cut off, which runs again (docs/hooks.md). Before the key was stable, the catch-up found no record
matching any unnamed plugin and ran the hook of every one of them again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from graph_helpers import _TestPlugin, add_ticket, make_config
from test_turn_hook_killed import TwoTurnsLLM
from test_wip import _env

from orchestrator.killpoints import VARIABLE
from orchestrator.lifecycle.run_lifecycle import RunLifecycle, catch_up_end_hooks
from orchestrator.plugin_api import hookimpl
from orchestrator.plugins.manager import PluginRegistry, hook_keys
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing.fakes import RecordingCodingAgent

MACHINE_A = r"""
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_end_hook_keys_killed import machine
with machine(Path({home!r}), Path({project!r})) as orch:
    orch.run_ticket("t1")
"""
SYNC = r"""
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_end_hook_keys_killed import machine
from orchestrator.lifecycle.run_lifecycle import RunLifecycle, catch_up_end_hooks
with machine(Path({home!r}), Path({project!r})) as orch:
    catch_up_end_hooks(RunLifecycle(orch.store, orch.registry.hook, orch.config), print, ended_s_ago=0.0)
"""


def _dies(script: str, at: str, home: Path, project: Path) -> None:
    """Run `script` (machine A, or middle sync's catch-up) as a real process killed at `at`."""
    text = script.format(tests=str(Path(__file__).parent), home=str(home), project=str(project))
    proc = subprocess.run([sys.executable, "-c", text], capture_output=True, text=True, timeout=120,
                          env={**_env(), VARIABLE: at})
    assert proc.returncode == -9, proc.stderr[-3000:]


class Unnamed:
    """A plugin registered in code with no name (no `__name__`): pluggy names it `str(id(self))`.
    Two of them, labelled apart, are two plugins of one class."""

    def __init__(self, path: Path, label: str):
        self.path, self.label = path, label

    @hookimpl
    def on_ticket_complete(self, ticket, run_id, summary):
        with open(self.path, "a") as f:
            f.write(f"{self.label} {run_id}\n")


class Other(Unnamed):
    """An unnamed plugin of another class."""


def machine(home: Path, project: Path) -> Orchestrator:
    log = home / "ends.log"
    plugins = (_TestPlugin(), Other(log, "other"), Unnamed(log, "first"), Unnamed(log, "second"))
    registry = PluginRegistry(load_entry_points=False, extra_plugins=plugins)
    coder = RecordingCodingAgent([lambda prompt, cwd: "r2" if "p2" in prompt else "r1"] * 4)
    orch = Orchestrator(make_config(home), llm=TwoTurnsLLM(), coding_agent=coder, registry=registry)
    if not orch.store.list_runs("t1"):  # (machine A: the ticket is new)
        add_ticket(orch, project)
    return orch


def _ends(home: Path) -> list[str]:
    return [line.split()[0] for line in (home / "ends.log").read_text().split("\n")[:-1]]


# The hooks run last registered first: `second`, `first`, `other` (then the built-in GitHub
# plugin's, which the catch-up leaves to its own record). run.hooked:n: the n-th one's hook ran,
# its record not written; the ones before it are recorded.
@pytest.mark.parametrize(("at", "again", "left"), [("run.hooked:2", "first", ["other"]), ("run.hooked:3", "other", [])])
def test_an_unnamed_plugins_end_hook_recorded_before_a_kill_is_not_run_again(at, again, left, tmp_path, project):
    _dies(MACHINE_A, at, tmp_path, project)
    ran_in_a = _ends(tmp_path)
    with machine(tmp_path, project) as orch:
        lifecycle = RunLifecycle(orch.store, orch.registry.hook, orch.config)
        assert catch_up_end_hooks(lifecycle, lambda line: None, ended_s_ago=0.0) == 1
        assert orch.store.hooks_due() == []
    caught_up = _ends(tmp_path)[len(ran_in_a):]
    assert caught_up == [again, *left], (ran_in_a, caught_up)  # the one the kill cut off, and those after it
    assert sorted(ran_in_a + caught_up) == sorted(["second", "first", "other", again])


def test_middle_syncs_catch_up_killed_between_a_hook_and_its_record_repeats_that_one_hook_only(tmp_path, project):
    """The catch-up's own writes (mark_end_hook, then clear_hooks_due) across a kill of the
    process running it: A dies with every end hook owed (`run.hooks`); the first catch-up dies
    after `first`'s hook, `second`'s recorded (`run.hooked:2`); the next runs `first` again and
    `other`, never `second`, and leaves nothing due. Three processes: the keys must hold in each."""
    _dies(MACHINE_A, "run.hooks:1", tmp_path, project)
    assert not (tmp_path / "ends.log").exists()
    _dies(SYNC, "run.hooked:2", tmp_path, project)
    assert _ends(tmp_path) == ["second", "first"]
    with machine(tmp_path, project) as orch:
        lifecycle = RunLifecycle(orch.store, orch.registry.hook, orch.config)
        assert catch_up_end_hooks(lifecycle, lambda line: None, ended_s_ago=0.0) == 1
        assert catch_up_end_hooks(lifecycle, lambda line: None, ended_s_ago=0.0) == 0
        assert orch.store.hooks_due() == []
    assert _ends(tmp_path) == ["second", "first", "first", "other"]


def test_the_key_of_a_plugin_is_its_name_or_its_class_numbered_in_registration_order(tmp_path):
    log = tmp_path / "ends.log"
    plugins = (Unnamed(log, "a"), Other(log, "b"), Unnamed(log, "c"))
    named = Unnamed(log, "d")
    registry = PluginRegistry(load_entry_points=False, extra_plugins=plugins)
    registry.pm.register(named, name="my-plugin")
    keys = hook_keys(registry.hook.on_ticket_complete.get_hookimpls())
    by_label = {impl.plugin.label: key for impl, key in keys if isinstance(impl.plugin, Unnamed)}
    where = f"{__name__}:"
    assert by_label == {"a": f"{where}Unnamed", "b": f"{where}Other", "c": f"{where}Unnamed#2", "d": "my-plugin"}
    assert "orchestrator.github.plugin" in {key for _impl, key in keys}  # a module: its name, as before
