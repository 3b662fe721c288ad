"""CodingAgentContract: what every coding agent must do, as a pytest suite to subclass.

Use it from a plugin's tests (as MemoryBackendContract for a memory backend)::

    from orchestrator.testing import AgentHarness, CodingAgentContract

    class TestMyAgent(CodingAgentContract):
        @pytest.fixture
        def harness(self, tmp_path):
            with my_fake_api(tmp_path) as fake:  # your agent's model API, answering from `script`
                yield AgentHarness(
                    make_agent=lambda **over: MyAgent(MyAgent.Options(**{**fake.options, **over}), env=fake.env),
                    script=fake.script, requests=fake.canonical_requests)

A built-in agent (one whose class has `offline`, see coding_agent.base.Offline) gets its harness
from `builtin_harness(kind, tmp_path)`.

The harness: `make_agent(**option_overrides)` builds the agent (the tests pass
`turn_timeout_s=...`, so the Options model needs that field); `script` is the fake_api
ScriptedResponder the agent's fake model API answers from on the "coding_agent" channel, in the
canonical (Anthropic Messages) shape: text, and tool_use blocks with Claude Code's tool names and
inputs (`Write {file_path, content}`); `requests()` returns the canonical bodies that fake received
on that channel, oldest first.

The tests: a turn (a scripted Write lands in cwd, the text comes back, a session id, a tool event
streamed), a resume (turn 2's model request carries turn 1's prompt), a confined write (a Write
outside cwd leaves no file), a failed tool call (a Read of a missing file comes back to the model
as a tool_result with is_error), a timeout (an answer slower than `turn_timeout_s`: is_error,
terminal_reason "timeout", no process of the turn left), an API error (500 then 401: is_error with
a sentence, no exception), a kill (the agent in a child process killed -9 mid-turn: nothing of the
turn left once the next `middle` has taken over) and `stop_all` (a running turn raises
RunInterrupted, its processes gone). The process checks need Linux (/proc).
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import CodingAgentError, RunInterrupted
from orchestrator.fake_api.messages import content_text, working_directory
from orchestrator.fake_api.replies import api_error, reply, tool_use
from orchestrator.fake_api.scripted import ScriptedResponder
from orchestrator.procs.orphans import stop_marked
from orchestrator.testing.git import make_repo
from orchestrator.testing.turn_processes import WAIT_S, alive, descendants, turn_processes, wait_until

__all__ = ["AgentHarness", "CodingAgentContract", "builtin_harness"]

_WAIT_S = WAIT_S  # the longest any wait (a slow CI machine), never the expected time
_HELD_S = 120.0  # a held reply's longest hold; released at the test's end in any case


@dataclass
class AgentHarness:
    """An agent under test and the fake model API it talks to (see the module docstring)."""

    make_agent: Callable[..., Any]
    script: ScriptedResponder
    requests: Callable[[], list[dict[str, Any]]]


@contextmanager
def builtin_harness(kind: str, tmp_path: Path, registry: Any = None) -> Iterator[AgentHarness]:
    """The harness of a registered agent whose class has `offline(responder, workdir)`: its fake
    API started on a fresh ScriptedResponder, the agent built with the offline options and env.
    The test is skipped when the agent's `find_cli` finds no CLI (failed under CI)."""
    from orchestrator.plugins.manager import PluginRegistry

    reg = registry or PluginRegistry(load_entry_points=False)
    cls = reg.coding_agent_class(kind)
    if not callable(getattr(cls, "offline", None)):
        raise TypeError(f"coding agent {kind!r} ({cls.__name__}) has no `offline` classmethod; "
                        "build an AgentHarness yourself")
    script = ScriptedResponder()
    with cls.offline(script, Path(tmp_path) / f"{kind}-offline") as off:
        _require_cli(cls, off.options)

        def make_agent(**overrides: Any) -> Any:
            return cls(cls.Options(**{**off.options, **overrides}), env=dict(off.env))

        yield AgentHarness(make_agent=make_agent, script=script, requests=off.requests)


def _require_cli(cls: Any, options: dict[str, Any]) -> None:
    """Skip the test when the agent's CLI is missing (its `find_cli` says so, with the install
    command), or fail it under CI, which installs every built-in agent's CLI (.ci/run)."""
    find = getattr(cls, "find_cli", None)
    if find is None:
        return
    try:
        find(cls.Options(**options))
    except CodingAgentError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but the {cls.kind} CLI is missing: {exc}")
        pytest.skip(str(exc))


class _Hold:
    """A scripted reply that does not come: it notes the turn's processes when the agent's request
    arrives (the turn is surely running then), then holds until released (or `_HELD_S`)."""

    def __init__(self, root: Callable[[], int], session_id: str, besides: set[int]):
        self.root, self.session_id, self.besides = root, session_id, besides
        self.reached = threading.Event()
        self.release = threading.Event()
        self.seen: set[tuple[int, int]] = set()

    def __call__(self, body: dict[str, Any]) -> Any:
        self.seen = turn_processes(self.root(), self.session_id, besides=self.besides)
        self.reached.set()
        self.release.wait(_HELD_S)
        return "Too late."


def _none_marked(session_id: str) -> bool:
    return not turn_processes(None, session_id)


def _sentence(error: Any) -> bool:
    return isinstance(error, str) and len(error.split()) >= 3


def _run_in_child(agent: Any, prompt: str, cwd: str, session_id: str) -> None:
    agent.run_turn(prompt, Path(cwd), session_id=session_id, resume=False)


class CodingAgentContract:
    """Subclass as `Test...` and provide a `harness` fixture (an AgentHarness); see the module docstring."""

    turn_timeout_s = 3.0  # the timeout test's turn_timeout_s (the fake holds its reply longer)
    runs_a_process = True  # False: the agent runs in-process, so the process checks find nothing to check
    has_stop_all = True  # False: the agent has no stop_all (then a batch waits out a grace period)

    # --- fixtures ------------------------------------------------------------------------
    @pytest.fixture
    def project(self, tmp_path: Path) -> Path:
        """The ticket's worktree: a git repository, as every ticket's is."""
        return make_repo(tmp_path / "project", {"README.md": "# contract project\n"}).resolve()

    @pytest.fixture
    def holds(self) -> Iterator[list[_Hold]]:
        held: list[_Hold] = []
        yield held
        for hold in held:  # never leave the fake's thread waiting after the test
            hold.release.set()

    @staticmethod
    def new_session() -> str:
        return str(uuid.uuid4())  # Claude Code wants a UUID; others take any string

    def _hold(self, holds: list[_Hold], root: Callable[[], int], session_id: str) -> _Hold:
        # Run in this process, the turn's processes are this process's children but those already here.
        hold = _Hold(root, session_id, descendants(os.getpid()) if root() == os.getpid() else set())
        holds.append(hold)
        return hold

    def _assert_gone(self, seen: set[tuple[int, int]], session_id: str, what: str) -> None:
        if self.runs_a_process:
            assert seen, "no process of the turn was found while it ran (runs_a_process = True)"
        assert wait_until(lambda: not alive(seen)), f"{what}: these processes of the turn still run: {alive(seen)}"
        left = turn_processes(None, session_id)
        assert not left, f"{what}: processes with the turn's orphan marker still run: {left}"

    # --- a turn --------------------------------------------------------------------------
    def test_a_turn_writes_a_file_in_cwd_and_streams_its_tool_call(self, harness: AgentHarness, project: Path):
        target = project / "hello.txt"
        harness.script.coding_agent(reply(tool_use("Write", {"file_path": str(target),
                                                             "content": "hello from the contract\n"})),
                                    "Wrote hello.txt.")
        events: list[dict[str, Any]] = []
        turn = harness.make_agent().run_turn("Write hello.txt saying hello.", project,
                                             session_id=self.new_session(), resume=False,
                                             on_event=events.append)
        assert turn.is_error is False, turn.error
        assert target.read_text() == "hello from the contract\n"
        assert "Wrote hello.txt." in turn.text
        assert turn.session_id
        assert any(e.get("type") == "tool_use" for e in events), [e.get("type") for e in events]
        first = harness.requests()[0]
        assert "Write hello.txt saying hello." in "\n".join(content_text(m.get("content"))
                                                           for m in first.get("messages") or [])
        cwd = working_directory(first)
        assert cwd and Path(cwd).resolve() == project, f"the model's request names {cwd!r} as the working directory"

    def test_a_resumed_turn_carries_the_first_turn_to_the_model(self, harness: AgentHarness, project: Path):
        harness.script.coding_agent("Noted: PAPAYA-7.", "The word was PAPAYA-7.")
        agent, session = harness.make_agent(), self.new_session()
        first = agent.run_turn("Remember the word PAPAYA-7.", project, session_id=session, resume=False)
        assert first.is_error is False, first.error
        before = len(harness.requests())
        second = agent.run_turn("Which word did I ask you to remember?", project,
                                session_id=first.session_id or session, resume=True)
        assert second.is_error is False, second.error
        assert "PAPAYA-7" in second.text
        later = harness.requests()[before:]
        assert later, "turn 2 made no model request"
        sent = "\n".join(content_text(m.get("content")) for m in later[-1].get("messages") or [])
        assert "Remember the word PAPAYA-7." in sent and "Which word did I ask you to remember?" in sent

    def test_a_write_outside_cwd_is_refused(self, harness: AgentHarness, project: Path, tmp_path: Path):
        outside = tmp_path / "outside"
        outside.mkdir()
        target = outside / "escape.txt"
        harness.script.coding_agent(reply(tool_use("Write", {"file_path": str(target), "content": "escaped\n"})),
                                    "I could not write there.")
        turn = harness.make_agent().run_turn(f"Write {target}.", project, session_id=self.new_session(),
                                             resume=False)
        assert not target.exists(), "the agent wrote outside its working directory"
        assert not any(outside.iterdir())
        assert turn.session_id

    def test_a_failed_tool_call_reaches_the_model_as_failed(self, harness: AgentHarness, project: Path):
        # The model must learn a call failed (Messages API: its tool_result's is_error), whatever
        # wire the agent speaks: a script (or the middle agent's demo model) reacts to it.
        missing = project / "no-such-file.txt"
        harness.script.coding_agent(reply(tool_use("Read", {"file_path": str(missing)})), "It is not there.")
        turn = harness.make_agent().run_turn("Read no-such-file.txt.", project, session_id=self.new_session(),
                                             resume=False)
        assert turn.session_id, turn
        results = [block for body in harness.requests()[1:] for m in body.get("messages") or []
                   if isinstance(m.get("content"), list)
                   for block in m["content"] if isinstance(block, dict) and block.get("type") == "tool_result"]
        assert results, "the model was never sent the Read's result"
        assert any(block.get("is_error") is True for block in results), results

    # --- failures ------------------------------------------------------------------------
    @pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
    def test_a_turn_past_its_timeout_is_ended_with_its_processes(self, harness: AgentHarness, project: Path,
                                                                 holds: list[_Hold]):
        # The timeout is meant to strike while the agent waits on its model. On a busy machine an
        # agent can take longer than turn_timeout_s to start; that turn must time out cleanly too
        # (checked), and the next try doubles the timeout, so a slow start is not a failure.
        timeout_s = self.turn_timeout_s
        for _try in range(3):
            session = self.new_session()
            hold = self._hold(holds, os.getpid, session)
            harness.script.clear()
            harness.script.coding_agent(hold)
            turn = harness.make_agent(turn_timeout_s=timeout_s).run_turn(
                "Take your time.", project, session_id=session, resume=False)
            assert turn.is_error is True and turn.terminal_reason == "timeout", turn
            assert _sentence(turn.error), turn.error
            if hold.reached.is_set():
                self._assert_gone(hold.seen, session, "after the timeout")
                return
            hold.release.set()
            assert wait_until(functools.partial(_none_marked, session)), \
                f"a turn timed out before asking its model; its processes still run: {turn_processes(None, session)}"
            timeout_s *= 2
        pytest.fail(f"the agent never asked its model within turn_timeout_s of up to {timeout_s / 2:g} s")

    def test_an_api_error_is_a_failed_turn_with_a_sentence(self, harness: AgentHarness, project: Path):
        # A 500 (which a CLI may retry), then 401s (which none should): the turn fails either way.
        # The 500 asks for its retry at once (retry-after): a CLI that honours it (OpenCode, Claude
        # Code) does not wait out its own backoff (OpenCode's: 2 s) before the 401.
        soon = {"retry-after-ms": "10", "retry-after": "0"}
        harness.script.coding_agent(api_error(500, "The fake model is down.", headers=soon),
                                    *[api_error(401, "invalid x-api-key")] * 5)
        turn = harness.make_agent().run_turn("Say hello.", project, session_id=self.new_session(), resume=False)
        harness.script.clear()
        assert turn.is_error is True, turn
        assert _sentence(turn.error), turn.error

    @pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc and prctl")
    def test_nothing_of_a_turn_outlives_a_killed_middle(self, harness: AgentHarness, project: Path,
                                                        holds: list[_Hold]):
        session = self.new_session()
        agent = harness.make_agent()
        # The child is a fork of this process (so it has the agent as built here), driving the turn
        # as `middle` does; the fake stays here and sees the turn's request.
        child = multiprocessing.get_context("fork").Process(
            target=_run_in_child, args=(agent, "Take your time.", str(project), session), daemon=True)
        hold = self._hold(holds, lambda: child.pid or -1, session)
        harness.script.coding_agent(hold)
        child.start()
        try:
            assert wait_until(lambda: hold.reached.is_set() or not child.is_alive()) and hold.reached.is_set(), \
                f"the agent never asked its model (child exit code {child.exitcode})"
            os.kill(child.pid or -1, signal.SIGKILL)  # `middle` killed mid-turn
            child.join(_WAIT_S)
            # What the next `middle` does when it takes the run over (orphans.stop_dead_run).
            stop_marked([session], owner="dead")
            self._assert_gone(hold.seen, session, "after kill -9 of the process running the turn")
        finally:
            if child.is_alive():
                child.kill()
            for pid, _ticks in alive(hold.seen):  # only when an assertion failed: never leave them running
                os.kill(pid, signal.SIGKILL)

    @pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
    def test_stop_all_ends_a_running_turn(self, harness: AgentHarness, project: Path, holds: list[_Hold]):
        agent = harness.make_agent()
        if not self.has_stop_all:
            pytest.skip("has_stop_all = False")
        assert callable(getattr(agent, "stop_all", None)), "no stop_all method (set has_stop_all = False)"
        session = self.new_session()
        hold = self._hold(holds, os.getpid, session)
        harness.script.coding_agent(hold)
        raised: list[BaseException] = []

        def turn() -> None:
            try:
                agent.run_turn("Take your time.", project, session_id=session, resume=False)
            except BaseException as exc:  # RunInterrupted is a KeyboardInterrupt
                raised.append(exc)

        thread = threading.Thread(target=turn, daemon=True)
        thread.start()
        assert wait_until(lambda: hold.reached.is_set() or not thread.is_alive()) and hold.reached.is_set(), \
            f"the agent never asked its model ({raised})"
        assert agent.stop_all("stopped by the contract") >= 1
        thread.join(_WAIT_S)
        assert not thread.is_alive(), "run_turn did not return after stop_all"
        assert raised and isinstance(raised[0], RunInterrupted), raised
        self._assert_gone(hold.seen, session, "after stop_all")
