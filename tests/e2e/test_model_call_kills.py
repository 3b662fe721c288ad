"""kill -9 of `middle` while the middle agent's model call runs through a CLI (`[agent] provider =
"claude-code"` or `"codex"`): the CLI and all it started (Codex's native binary under its Node
launcher) are gone at once, with no next `middle`; while it ran, it carried the run's marker
(`model-<run>`), which the `middle` taking a dead run over sweeps (orphans.stop_dead_run).

The real `middle run`, the real CLI on its fake (the Messages API for Claude Code, the Responses
API for Codex); the fake holds the plan's reply until the processes are found gone (released
earlier, a CLI that outlived `middle` would finish its call and exit, hiding it). A few seconds
each: both are in the normal suite. Before process.Guarded, both failed: `claude`, and Codex's
`node` launcher with its native `codex`, ran on after the kill, waiting for the model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import fresh_project, plan

from orchestrator.fake_api import claude_code_env
from orchestrator.fake_api.openai_responses import FakeResponsesAPI
from orchestrator.procs.orphans import model_mark
from orchestrator.testing.clis import require_cli
from orchestrator.testing.turn_processes import WAIT_S, alive, turn_processes, wait_until
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc and prctl")]

MIDDLE = str(Path(sys.executable).with_name("middle"))
TICKET = "---\ntitle: Notes\nproject: calc\nid: t1\n---\nCreate notes.txt.\n"
KEY_VAR = "CODEX_PROVIDER_TEST_KEY"


def held(in_flight: threading.Event, release: threading.Event):
    """The plan's reply, held until the test lets go (never: `middle` is killed first)."""
    def step(body: Any) -> str:
        in_flight.set()
        release.wait(WAIT_S)
        return plan("never seen: middle is dead")
    return step


def name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def kill_mid_call(tmp_path: Path, env: dict[str, str], in_flight: threading.Event,
                  release: threading.Event) -> tuple[set[tuple[int, int]], list[str]]:
    """Start `middle run t1`, wait for its model call to be held, find the call's processes (the
    middle's descendants and those carrying the run's model marker), SIGKILL `middle` only; the
    processes found and their names. Asserts they carried the run's marker."""
    proc = subprocess.Popen([MIDDLE, "run", "t1"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    found: set[tuple[int, int]] = set()
    try:
        assert in_flight.wait(WAIT_S), (proc.stdout.read().decode() if proc.stdout and proc.poll() is not None
                                         else "stuck")
        with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
            run = store.latest_run("t1")
            assert run is not None
            run_id = run["id"]
        found = turn_processes(proc.pid, model_mark(run_id))
        marked = turn_processes(None, model_mark(run_id))
        names = sorted(name(pid) for pid, _ in found)
        assert marked, f"no process carries the run's model marker; the call's processes: {names}"
        proc.send_signal(signal.SIGKILL)  # middle only: the CLI runs in a session of its own
        proc.wait(30)
        return found, names
    except BaseException:
        release.set()
        raise
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def assert_all_gone(found: set[tuple[int, int]], names: list[str], release: threading.Event) -> None:
    """Every process found is gone while the fake still holds the reply (released, a CLI that
    outlived `middle` would finish its call and exit, hiding that it ran on)."""
    try:
        assert wait_until(lambda: not alive(found), WAIT_S), \
            f"outlived the killed middle: {sorted(name(p) for p, _ in alive(found))} (of {names})"
    finally:
        for pid, _ in alive(found):  # this test's own processes, whatever happened above
            os.kill(pid, signal.SIGKILL)
        release.set()


def test_a_model_call_through_claude_code_dies_with_a_killed_middle(tmp_path, fake_api, claude_cli):
    fresh_project(tmp_path, {"t1.md": TICKET})
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[memory]\nbackend = "none"\n'
        f'[agent]\nprovider = "claude-code"\ncli_path = "{claude_cli}"\n'
        f'[coding_agent.options]\ncli_path = "{claude_cli}"\n')
    in_flight, release = threading.Event(), threading.Event()
    fake_api.script.agent(held(in_flight, release))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    env = {**clean, **claude_code_env(fake_api.base_url, tmp_path / "claude-config", max_retries=0)}
    found, names = kill_mid_call(tmp_path, env, in_flight, release)
    assert "claude" in names, names
    assert_all_gone(found, names, release)


@contextmanager
def codex_home(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The real Codex CLI with a private home (nothing of the machine's ~/.codex) and the fake's key."""
    for sub in ("codex-home", "home"):
        (tmp_path / sub).mkdir()
    (tmp_path / "codex-home" / "config.toml").write_text(
        "[model_providers.middle]\nrequest_max_retries = 0\nstream_max_retries = 0\n")
    yield {"CODEX_HOME": str(tmp_path / "codex-home"), "HOME": str(tmp_path / "home"), KEY_VAR: "sk-fake-local",
           "NO_PROXY": "127.0.0.1,localhost"}


def test_a_model_call_through_codex_dies_with_a_killed_middle_native_binary_too(tmp_path):
    codex = require_cli("codex", "npm install -g @openai/codex@0.171.0")
    fresh_project(tmp_path, {"t1.md": TICKET})
    with FakeResponsesAPI() as fake, codex_home(tmp_path) as extra:
        (tmp_path / "middle.toml").write_text(
            'state_dir = "state"\n[project]\npath = "repo"\n[memory]\nbackend = "none"\n'
            f'[agent]\nprovider = "codex"\nmodel = "gpt-5.5"\ncli_path = "{codex}"\n'
            f'base_url = "{fake.base_url}"\napi_key_env = "{KEY_VAR}"\n')
        in_flight, release = threading.Event(), threading.Event()
        fake.script.agent(held(in_flight, release))
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
        found, names = kill_mid_call(tmp_path, {**clean, **extra}, in_flight, release)
        # the Node launcher and the native binary it runs (plus the group's guard, a python)
        assert "node" in names and "codex" in names, names
        assert_all_gone(found, names, release)

