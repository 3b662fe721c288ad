"""kill -9 between the plugins' on_turn_end hook and its record (turns.hooked, kill point
`turn.hooked`), then a resume: that one turn's hook runs again, with the same (run_id, turn_no)
for a plugin to dedupe on (docs/hooks.md), and no other turn's hook runs twice. (A kill after the
record finds it: the resume's work node, run again when the kill came before its checkpoint,
skips the hook.)

Machine A is a real process (SQLite store, the real graph) that kills itself (SIGKILL) at the
point; the resume runs here, the same host seeing A's process gone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from graph_helpers import _TestPlugin, add_ticket, make_config
from test_wip import _env

from orchestrator.killpoints import VARIABLE
from orchestrator.plugin_api import hookimpl
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing.fakes import RecordingCodingAgent, decision_reply, plan_reply

MACHINE_A = r"""
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_turn_hook_killed import machine
with machine(Path({home!r}), Path({project!r}), {max_turns!r}) as orch:
    orch.run_ticket("t1")
"""


class TwoTurnsLLM:
    """The middle agent wherever a run resumes: a plan; "p2" until Claude Code answered "r2"."""

    def complete(self, system: str, messages: list[dict[str, str]], schema: Any) -> str:
        if schema.__name__ == "Plan":
            return plan_reply("p1")
        if "r2" in json.dumps(messages):
            return decision_reply(True, "done")
        return decision_reply(False, next_prompt="p2")


class HookLog:
    """A plugin appending each on_turn_end and on_ticket_complete it sees to a file both
    processes share; named, so its end hook's record (by plugin name) holds across processes."""

    def __init__(self, path: Path):
        self.path, self.__name__ = path, "hook-log"

    def _log(self, line: str) -> None:
        with open(self.path, "a") as f:
            f.write(line + "\n")

    @hookimpl
    def on_turn_end(self, ticket, run_id, turn):
        self._log(f"{run_id} {turn['turn_no']}")

    @hookimpl
    def on_ticket_complete(self, ticket, run_id, summary):
        self._log(f"{run_id} complete {summary}")

    @hookimpl
    def on_ticket_failed(self, ticket, run_id, reason):
        self._log(f"{run_id} failed {reason}")


def machine(home: Path, project: Path, max_turns: int = 5) -> Orchestrator:
    registry = PluginRegistry(load_entry_points=False, extra_plugins=(_TestPlugin(), HookLog(home / "hooks.log")))
    coder = RecordingCodingAgent([lambda prompt, cwd: "r2" if "p2" in prompt else "r1"] * 4)
    orch = Orchestrator(make_config(home, max_turns=max_turns), llm=TwoTurnsLLM(), coding_agent=coder,
                        registry=registry)
    if not orch.store.list_runs("t1"):  # (machine A: the ticket is new)
        add_ticket(orch, project)
    return orch


def machine_a_dies_at(at: str, tmp_path: Path, project: Path, max_turns: int = 5) -> None:
    """Run machine A (a real process) with MIDDLE_KILL_AT=`at`; it must die there (SIGKILL).
    `max_turns=1`: its run fails at the turn limit (the fail path)."""
    script = MACHINE_A.format(tests=str(Path(__file__).parent), home=str(tmp_path), project=str(project),
                              max_turns=max_turns)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**_env(), VARIABLE: at})
    assert proc.returncode == -9, proc.stderr[-3000:]


def _hooks_after_a_kill_at(at: str, tmp_path: Path, project: Path) -> list[str]:
    machine_a_dies_at(at, tmp_path, project)
    with machine(tmp_path, project) as orch:
        assert orch.resume("t1").status == "complete"
    return [line for line in (tmp_path / "hooks.log").read_text().split("\n")[:-1] if line.split()[1].isdigit()]


def test_a_kill_between_the_turn_hook_and_its_record_repeats_that_hook_with_its_key(tmp_path, project):
    hooks = _hooks_after_a_kill_at("turn.hooked:1", tmp_path, project)
    assert [line.split()[1] for line in hooks] == ["1", "1", "2"], hooks
    assert hooks[0] == hooks[1]  # the same (run_id, turn): the key a plugin dedupes on
