"""kill -9 of `middle`, for every built-in coding agent: the table of docs/runs.md ("Every coding agent").

Each cell runs the real `middle` CLI on a small git project with `[coding_agent] kind = KIND`, the
agent's real CLI on its offline fake (its class's `offline`, as `--fake` does) and the middle agent
on the fake Messages API, all answering from one script. The ticket takes two turns (a.txt, then
b.txt). The cells:

- (a) mid-turn: the fake holds turn 2's answer; `middle` (only it: the agent runs in a session of
  its own) is SIGKILLed. Every process of the turn (the CLI and what it started: OpenCode's server,
  aider's python, ...) is gone before the resumed turn reaches the model, and `middle resume`
  completes the ticket, turn 2 run again once, turn 1 never;
- (b) killed at `wip.committed` of turn 1 (its work and result committed, the turn not stored
  yet): `middle resume` stores turn 1 from that commit without running it again (its cost counted
  once) and runs turn 2;
- (c) in (b)'s resume, turn 2 continues the agent's own session: its model request carries turn 1.

(b) and (c) are one fast cell per agent in the normal suite; (a) is in the `killsweep` set.
"""

from __future__ import annotations

import json
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
from e2e_helpers import decide, done, fresh_project, plan, write_file

from orchestrator.errors import CodingAgentError
from orchestrator.fake_api import claude_code_env, reply, tool_use
from orchestrator.fake_api.messages import content_text
from orchestrator.killpoints import VARIABLE
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.testing.turn_processes import WAIT_S, alive, turn_processes, wait_until
from tickets.procs import stat_fields
from tickets.store import TicketStore

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")]

MIDDLE = str(Path(sys.executable).with_name("middle"))
KINDS = ["claude-code", "codex", "gemini", "opencode", "aider"]
TICKET = "---\ntitle: Two files\nproject: calc\nid: t1\n---\nCreate a.txt, then b.txt.\n"
FIRST, SECOND = "Create a.txt containing a.", "Now create b.txt containing b."
# Options beyond the agent's offline ones: Claude Code needs its write tools allowed; Codex and
# Gemini a price (their own tokens priced, whatever their fakes at 127.0.0.1 would count at: pricing.py).
PRICE = {"price": {"input": 1.0, "output": 2.0}}
EXTRA: dict[str, dict[str, Any]] = {"claude-code": {"allowed_tools": ["Read", "Write", "Edit"]},
                                    "codex": PRICE, "gemini": PRICE}


def toml_table(name: str, values: dict[str, Any]) -> str:
    """`[name]` with `values` (JSON scalars and lists, which TOML reads the same; dicts as subtables)."""
    lines = [f"[{name}]"] + [f"{k} = {json.dumps(v)}" for k, v in values.items() if not isinstance(v, dict)]
    tables = [toml_table(f"{name}.{k}", v) for k, v in values.items() if isinstance(v, dict)]
    return "\n".join(lines) + "\n" + "".join(tables)


@contextmanager
def project_on(kind: str, tmp_path: Path, fake_api: Any) -> Iterator[tuple[dict[str, str], Any]]:
    """The ticket's project with `middle.toml` naming `kind` and its offline options; yields the
    environment for `middle` and a function returning the canonical requests the agent's fake got."""
    cls = PluginRegistry(load_entry_points=False).coding_agent_class(kind)
    fresh_project(tmp_path, {"t1.md": TICKET})
    with cls.offline(fake_api.script, tmp_path / f"{kind}-offline") as off:
        options = {**off.options, **EXTRA.get(kind, {}), "turn_timeout_s": 300}
        try:
            cls.find_cli(cls.Options(**options))
        except CodingAgentError as exc:
            if os.environ.get("CI"):
                pytest.fail(f"CI=true but the {kind} CLI is missing: {exc}")
            pytest.skip(str(exc))
        (tmp_path / "middle.toml").write_text(
            'state_dir = "state"\n[project]\npath = "repo"\n[memory]\nbackend = "none"\n'
            f'[agent]\nmax_turns = 4\n[coding_agent]\nkind = "{kind}"\n'
            + toml_table("coding_agent.options", options))
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
        # The middle agent on the fake Messages API; the agent's own variables over them (Claude
        # Code's offline fake answers the middle agent too: both read the same script).
        env = {**clean, **claude_code_env(fake_api.base_url, tmp_path / "claude-config"), **off.env,
               "COLUMNS": "250"}
        yield env, off.requests


def middle(tmp_path: Path, env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MIDDLE, *args], cwd=tmp_path, env={**env, **extra}, text=True, capture_output=True,
                          timeout=600)


def last_user(request: dict[str, Any]) -> Any:
    return next((m["content"] for m in reversed(request["messages"]) if m["role"] == "user"), "")


def turn_starts(requests: list[dict[str, Any]], prompt: str) -> int:
    """How many times a turn with `prompt` was started: requests whose last user message is that
    prompt (not a tool's result within the turn)."""
    count = 0
    for request in requests:
        content = last_user(request)
        results = isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                                    for b in content)
        count += prompt in content_text(content) and not results
    return count


def users(request: dict[str, Any]) -> list[str]:
    return [content_text(m["content"]) for m in request["messages"] if m["role"] == "user"]


def stored(tmp_path: Path) -> tuple[list[tuple[int, str, str | None]], list[Any], float, int]:
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        runs = store.list_runs("t1")
        turns = store.list_turns(ticket_id="t1")
        total = store.total_cost(runs[0]["id"])
        ends = [e["kind"] for e in store.list_events(run_id=runs[0]["id"], limit=100_000)].count("run_end")
    return [(t["turn_no"], t["status"], t["response"]) for t in turns], [t["cost_usd"] for t in turns], total, ends


def assert_complete_once(tmp_path: Path, resumed: subprocess.CompletedProcess[str]) -> tuple[list[Any], float]:
    out = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0 and "Traceback" not in out, out
    turns, costs, total, ends = stored(tmp_path)
    # (aider's answer also lists the file it wrote)
    assert [(n, status, (said or "").endswith(("Created a.txt.", "Applied edit to a.txt") if n == 1 else
                                      ("Created b.txt.", "Applied edit to b.txt")))
            for n, status, said in turns] == [(1, "done", True), (2, "done", True)], (turns, out)
    assert ends == 1
    wt = tmp_path / "state" / "worktrees" / "t1"
    assert (wt / "a.txt").read_text() == "a\n" and (wt / "b.txt").read_text() == "b\n"
    return costs, total


@pytest.mark.parametrize("kind", KINDS)
def test_killed_after_a_turns_work_is_committed_resume_does_not_run_it_again(kind, tmp_path, fake_api):
    """(b) and (c): killed at wip.committed:1, then `middle resume`."""
    with project_on(kind, tmp_path, fake_api) as (env, requests):
        fake_api.script.agent(plan(FIRST))
        fake_api.script.coding_agent(write_file("a.txt", "a\n"), done("Created a.txt."))
        killed = middle(tmp_path, env, "run", "t1", **{VARIABLE: "wip.committed:1"})
        assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
        before = len(requests())
        assert fake_api.script.pending("coding_agent") == 0 and before >= 2
        fake_api.script.agent(decide(False, "a.txt is there.", SECOND), decide(True, "Created a.txt and b.txt."))
        fake_api.script.coding_agent(write_file("b.txt", "b\n"), done("Created b.txt."))
        resumed = middle(tmp_path, env, "resume", "t1")
        after = requests()
    costs, total = assert_complete_once(tmp_path, resumed)
    # (b) Turn 1 ran once (on the killed middle), turn 2 once; nothing of the script is left.
    assert turn_starts(after, FIRST) == 1 and turn_starts(after, SECOND) == 1, [users(r) for r in after]
    assert fake_api.script.pending("coding_agent") == 0 and fake_api.script.pending("agent") == 0
    # Its cost is counted once: the run's cost is its two turns', turn 1's taken from its commit.
    assert total == pytest.approx(sum(c or 0 for c in costs))
    assert all(c is not None and c > 0 for c in costs), costs  # turn 1's survived the kill, not lost
    # (c) Turn 2 continues the agent's own session (aider's too: its history file is in the
    # worktree's git dir): its request carries turn 1's prompt as an earlier message, not a recap
    # in its own prompt.
    turn2 = [r for r in after[before:] if SECOND in users(r)[-1]][0]
    said = users(turn2)
    assert any(FIRST in earlier for earlier in said[:-1]) and FIRST not in said[-1], said


def parent(pid: int) -> int | None:
    fields = stat_fields(pid)
    return int(fields[1]) if fields else None


def names(procs: set[tuple[int, int]]) -> str:
    """The processes' names (for the messages and the table), sorted."""
    found = []
    for pid, _ticks in procs:
        try:
            found.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            found.append(f"{pid} (gone)")
    return ", ".join(sorted(found)) or "none"


class Hold:
    """Turn 2's reply: hold it (the turn is surely running then) until released."""

    def __init__(self) -> None:
        self.reached, self.release = threading.Event(), threading.Event()

    def __call__(self, body: dict[str, Any]) -> Any:
        self.reached.set()
        self.release.wait(WAIT_S * 3)
        return done("never seen: middle is dead")


@pytest.mark.killsweep
@pytest.mark.parametrize("kind", KINDS)
def test_killed_mid_turn_nothing_of_the_turn_outlives_it_and_resume_runs_it_once(kind, tmp_path, fake_api,
                                                                                record_property):
    """(a): `middle` SIGKILLed while turn 2 waits for the model."""
    hold = Hold()
    with project_on(kind, tmp_path, fake_api) as (env, requests):
        fake_api.script.agent(plan(FIRST), decide(False, "a.txt is there.", SECOND))
        fake_api.script.coding_agent(write_file("a.txt", "a\n"), done("Created a.txt."), hold)
        proc = subprocess.Popen([MIDDLE, "run", "t1"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        seen: set[tuple[int, int]] = set()
        try:
            assert wait_until(lambda: hold.reached.is_set() or proc.poll() is not None) and hold.reached.is_set(), \
                proc.stdout.read().decode() if proc.stdout and proc.poll() is not None else "no turn 2"
            with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
                turn2 = store.get_turn(store.latest_run("t1")["id"], 2)
            assert turn2 is not None and turn2["status"] == "running" and turn2["session_id"]
            seen = turn_processes(proc.pid, turn2["session_id"])
            cli = {(pid, ticks) for pid, ticks in seen if parent(pid) == proc.pid}  # the agent's CLI
            assert cli, f"no process of the turn found under middle ({names(seen)})"
            proc.send_signal(signal.SIGKILL)  # middle only
            proc.wait(WAIT_S)
            # The CLI dies with middle (PR_SET_PDEATHSIG), the rest of its process group with it
            # (the group's guard: Codex's native binary); a tool shell in a session of its own
            # would carry the marker the next middle stops before its first turn.
            wait_until(lambda: not alive(seen))
            left_after_kill = alive(seen)
            # Nothing of the turn is left (all in the CLI's process group: the held turn started no
            # tool shell), without waiting for a next middle.
            assert not left_after_kill, f"outlived middle: {names(left_after_kill)} (of {names(seen)})"
            record_property("processes", names(seen))
            before = len(requests())
            at_resume: list[set[tuple[int, int]]] = []

            def resumed_turn(body: dict[str, Any]) -> Any:
                at_resume.append(alive(seen))
                return write_file("b.txt", "b\n")(body)

            hold.release.set()
            fake_api.script.agent(decide(True, "Created a.txt and b.txt."))
            fake_api.script.coding_agent(resumed_turn, done("Created b.txt."))
            resumed = middle(tmp_path, env, "resume", "t1")
            after = requests()
        finally:
            hold.release.set()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.stdout is not None:
                proc.stdout.close()
            for pid, _ticks in alive(seen):  # only when an assertion failed: never leave them running
                os.kill(pid, signal.SIGKILL)
    assert at_resume and at_resume[0] == set(), (at_resume, left_after_kill)
    assert_complete_once(tmp_path, resumed)
    # Turn 1 ran once; turn 2 twice in all: the killed one and the resumed one, once.
    assert turn_starts(after, FIRST) == 1, [users(r) for r in after]
    assert sum(1 for r in after[before:] if turn_starts([r], SECOND)) == 1, [users(r) for r in after[before:]]
    assert fake_api.script.pending("coding_agent") == 0


@pytest.mark.killsweep
def test_codex_killed_while_its_shell_runs_leaves_nothing_once_resume_starts(tmp_path, fake_api, record_property):
    """(a) with a tool shell: Codex runs `sleep` for turn 2 when `middle` is SIGKILLed. Codex (its
    launcher and native binary) dies at once; the shell is gone before the resumed turn reaches
    the model."""
    sleep = f"sleep 5{os.getpid():07d}"
    with project_on("codex", tmp_path, fake_api) as (env, requests):
        fake_api.script.agent(plan(FIRST), decide(False, "a.txt is there.", SECOND))
        fake_api.script.coding_agent(write_file("a.txt", "a\n"), done("Created a.txt."),
                                     reply(tool_use("Bash", {"command": sleep})))
        proc = subprocess.Popen([MIDDLE, "run", "t1"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        seen: set[tuple[int, int]] = set()
        try:
            assert wait_until(lambda: bool(shells(sleep)) or proc.poll() is not None) and shells(sleep), \
                "the shell never started"
            with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
                turn2 = store.get_turn(store.latest_run("t1")["id"], 2)
            assert turn2 is not None and turn2["session_id"]
            seen = turn_processes(proc.pid, turn2["session_id"])
            assert shells(sleep) <= {pid for pid, _ticks in seen}  # the shell is one of the turn's
            codex = {p for p in seen if p[0] not in shells(sleep)}
            proc.send_signal(signal.SIGKILL)
            proc.wait(WAIT_S)
            wait_until(lambda: not alive(codex))
            assert not alive(codex), f"outlived middle: {names(alive(codex))}"
            record_property("processes", f"{names(seen)}; left until the resume: {names(alive(seen))}")
            at_resume: list[set[tuple[int, int]]] = []

            def resumed_turn(body: dict[str, Any]) -> Any:
                at_resume.append(alive(seen))
                return write_file("b.txt", "b\n")(body)

            fake_api.script.clear("coding_agent")  # what the killed turn left unasked
            fake_api.script.agent(decide(True, "Created a.txt and b.txt."))
            fake_api.script.coding_agent(resumed_turn, done("Created b.txt."))
            resumed = middle(tmp_path, env, "resume", "t1")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            for pid, _ticks in alive(seen):
                os.kill(pid, signal.SIGKILL)
            for pid in shells(sleep):
                os.kill(pid, signal.SIGKILL)
    assert at_resume and at_resume[0] == set(), at_resume
    assert_complete_once(tmp_path, resumed)


def shells(needle: str) -> set[int]:
    """Running processes whose command line contains needle."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            fields = stat_fields(int(entry))
            if needle in cmd and fields and fields[0] != "Z":
                found.add(int(entry))
    return found
