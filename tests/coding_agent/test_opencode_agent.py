"""The OpenCode agent with the real `opencode` CLI on the fake Chat Completions API (its offline
setup), beyond the contract kit (test_opencode_contract.py: a turn, a resume, a confined write, a
timeout, an API error, kill -9, stop_all): its events, tokens and cost, a resume from another
process, a lost session, a permission it would ask for, an API error's status; and a missing CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.coding_agent import process
from orchestrator.coding_agent.api_errors import CONNECT, kind_of
from orchestrator.coding_agent.opencode import INSTALL, OpenCodeAgent, OpenCodeOptions
from orchestrator.coding_agent.opencode_offline import MODEL, PROVIDER, offline_home
from orchestrator.config.offline import FAKE_API_KEY
from orchestrator.errors import CodingAgentError
from orchestrator.fake_api import ScriptedResponder, api_error, reply, text, tool_use, working_directory
from orchestrator.fake_api.messages import content_text
from orchestrator.fake_api.openai_chat import FakeChatCompletionsAPI
from orchestrator.graph.rounds import session_lost
from orchestrator.testing import make_repo
from orchestrator.testing.clis import require_cli
from orchestrator.testing.gone import WIP, going_away


@dataclass
class Harness:
    script: ScriptedResponder
    off: Any

    def agent(self, **options: Any) -> OpenCodeAgent:
        return OpenCodeAgent(OpenCodeOptions(**{**self.off.options, **options}), env=dict(self.off.env))


@pytest.fixture
def oc(tmp_path) -> Iterator[Harness]:
    require_cli("opencode", INSTALL)
    script = ScriptedResponder()
    with OpenCodeAgent.offline(script, tmp_path / "offline") as off:
        yield Harness(script, off)


@pytest.fixture
def project(tmp_path) -> Path:
    return make_repo(tmp_path / "project", {"README.md": "# p\n"}).resolve()


def said(body: dict[str, Any]) -> str:
    return "\n".join(content_text(m.get("content")) for m in body.get("messages") or [])


def test_a_turn_writes_in_the_project_and_streams_its_tool_call_with_tokens(oc, project):
    oc.script.coding_agent(
        lambda body: reply(text("Writing it."), tool_use("Write", {"file_path": f"{working_directory(body)}/hi.txt",
                                                                   "content": "hi\n"})),
        "Created hi.txt.")
    events: list[dict[str, Any]] = []
    turn = oc.agent().run_turn("-Write hi.txt.", project, session_id="s-1", resume=False, on_event=events.append)
    assert turn.is_error is False, turn.error
    assert (project / "hi.txt").read_text() == "hi\n"
    assert turn.text == "Created hi.txt." and turn.session_id == "s-1" and turn.num_turns == 2
    assert turn.usage["input_tokens"] > 0 and turn.usage["output_tokens"] > 0
    # The offline model's price (3 and 15 USD per million tokens), summed over the turn's two steps.
    expected = (turn.usage["input_tokens"] * 3 + turn.usage["output_tokens"] * 15) / 1e6
    assert turn.cost_usd == pytest.approx(expected, rel=1e-6)
    use = next(e for e in events if e["type"] == "tool_use")
    assert use["name"] == "write" and use["input"]["file_path"] == f"{project}/hi.txt"
    assert [e["type"] for e in events][-1] == "result"
    first, second = oc.off.requests()
    assert said(first).startswith("-Write hi.txt.")  # from stdin: a leading "-" is not an option
    assert working_directory(first) == str(project)
    assert second["messages"][-1]["content"][0]["content"] == "Wrote file successfully."


@dataclass
class Resumed:
    """One first turn and its resume by a new agent (a `middle` restarted after a crash), both with
    the user's TMPDIR, which holds what a killed `middle`'s turn left and a running one's dir."""

    first: Any
    second: Any
    requests: list[dict[str, Any]]
    tmp_after: list[str]
    running: str
    gone: str


@pytest.fixture(scope="module")
def resumed(tmp_path_factory) -> Iterator[Resumed]:
    # One run serves three tests (a resume from a new process, and what the turns leave in and
    # take from TMPDIR): each OpenCode turn costs several CPU-seconds of its start-up.
    require_cli("opencode", INSTALL)
    base = tmp_path_factory.mktemp("opencode-resumed")
    project = make_repo(base / "project", {"README.md": "# p\n"}).resolve()
    tmp = base / "user-tmp"
    tmp.mkdir()
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    gone = tmp / f"middle-opencode-tmp-{ended.pid}-abc"  # its `middle` was killed with -9
    gone.mkdir()
    (gone / ".bcfddddeb6b5b7be-00000000.so").write_bytes(b"x")
    running = tmp / f"middle-opencode-tmp-{os.getpid()}-def"  # its `middle` still runs
    running.mkdir()
    script = ScriptedResponder()
    with OpenCodeAgent.offline(script, base / "offline") as off:
        script.coding_agent("Noted: PAPAYA-7.", "The word was PAPAYA-7.")
        env = {**off.env, "TMPDIR": str(tmp)}
        first = OpenCodeAgent(OpenCodeOptions(**off.options), env=env).run_turn(
            "Remember PAPAYA-7.", project, session_id="s-2", resume=False)
        # A new agent: the session is found by its title (a `session list` run, with TMPDIR too).
        second = OpenCodeAgent(OpenCodeOptions(**off.options), env=env).run_turn(
            "Which word?", project, session_id="s-2", resume=True)
        yield Resumed(first, second, off.requests(), sorted(p.name for p in tmp.iterdir()), running.name, gone.name)


def test_a_turn_leaves_nothing_in_the_temporary_directory(resumed):
    """OpenCode unpacks a 5.5 MB native library (.<hash>-00000000.so) into $TMPDIR on every start
    and never removes it: a turn (and its resume's session lookup) leaves nothing of its own there."""
    assert resumed.first.is_error is False, resumed.first.error
    assert resumed.second.is_error is False, resumed.second.error
    assert resumed.tmp_after == [resumed.running]


def test_a_turn_removes_the_temporary_directory_a_killed_middle_left(resumed):
    """A `middle` killed with -9 never removes its turn's TMPDIR (the library in it too): the next
    turn removes the ones whose `middle` no longer runs, and keeps those of one that does."""
    assert resumed.first.is_error is False, resumed.first.error
    assert resumed.gone not in resumed.tmp_after and resumed.running in resumed.tmp_after


def test_a_resume_from_a_new_process_finds_the_session_and_carries_the_first_turn(resumed):
    assert resumed.first.is_error is False, resumed.first.error
    assert resumed.second.is_error is False, resumed.second.error
    assert resumed.second.text == "The word was PAPAYA-7."
    last = said(resumed.requests[-1])
    assert "Remember PAPAYA-7." in last and "Noted: PAPAYA-7." in last and "Which word?" in last


def test_a_resume_of_a_session_opencode_does_not_have_says_so(oc, project):
    turn = oc.agent().run_turn("Again.", project, session_id="never-started", resume=True)
    assert turn.is_error and session_lost(turn), turn.error  # the graph then starts a new session
    assert oc.off.requests() == []


def test_a_permission_opencode_would_ask_for_fails_the_turn_saying_how_to_allow_it(oc, project):
    (project / "notes.txt").write_text("secret\n")
    oc.script.coding_agent(reply(tool_use("Read", {"file_path": str(project / "notes.txt")})), "Read it.")
    turn = oc.agent(permission={"read": "ask"}).run_turn("Read notes.", project, session_id="s-7", resume=False)
    assert turn.is_error and turn.permission_denials == [{"tool": "read", "target": str(project / "notes.txt")}]
    assert turn.error.startswith("OpenCode stopped the turn when it asked permission for read (notes.txt): nobody")
    assert len(oc.off.requests()) == 1  # refused, not run: the model never saw the file


def test_an_api_error_is_a_failed_turn_with_a_sentence(oc, project):
    oc.script.coding_agent(*[api_error(401, "Incorrect API key provided.")] * 3)
    turn = oc.agent().run_turn("Hello.", project, session_id="s-4", resume=False)
    oc.script.clear()
    assert turn.is_error and turn.api_error_status == 401
    assert turn.error.startswith("OpenCode could not get an answer from the model (HTTP 401): Incorrect API key")


# What OpenCode prints for each status its fake (OpenAI's Chat Completions shape) answers, the status
# middle reads (a context too long is its ContextOverflowError, without one) and what the user is
# told to do (orchestrator/coding_agent/api_errors.py; the table in docs/coding-agent.md). It
# retries a 429 and a 5xx, after the server's retry-after (sent short here: seconds, not minutes).
# (A 403 takes the 401's path, a 413 the 400's ContextOverflowError: probed by hand, not run here.)
OPENCODE_ERRORS = [
    (401, "Incorrect API key provided.", "Incorrect API key", 401, "Check the API key"),
    (404, "The model `nope` does not exist", "The model `nope` does not exist", 404,
     "The model was not found: set `[coding_agent.options] model`"),
    (400, "This model's maximum context length is 8192 tokens", "ContextOverflowError", None,
     "longer than the model's context window"),
    (429, "Rate limit reached", "Rate limit reached", 429, "Wait for the provider's rate limit"),
    (503, "overloaded", "overloaded", 503, "The model API's server failed"),
]


@pytest.mark.parametrize("status, message, words, read, todo", OPENCODE_ERRORS,
                         ids=[str(c[0]) for c in OPENCODE_ERRORS])
def test_each_model_api_error_is_read_as_its_status_and_says_what_to_do(oc, project, status, message, words, read,
                                                                       todo):
    quick = {"retry-after-ms": "10", "retry-after": "0"}
    oc.script.coding_agent(*[api_error(status, message, "context_length_exceeded" if status == 400 else None,
                                       headers=quick)] * 12)
    turn = oc.agent().run_turn("Hello.", project, session_id=f"s-kind-{status}", resume=False)
    oc.script.clear()
    assert turn.is_error and turn.api_error_status == read, turn.error
    said = f" (HTTP {read})" if read is not None else ""
    assert (turn.error or "").startswith(f"OpenCode could not get an answer from the model{said}: "), turn.error
    assert words in (turn.error or "") and todo in (turn.error or ""), turn.error


def test_a_model_api_that_goes_away_mid_turn_ends_the_turn_at_once_as_unreachable(tmp_path, project, monkeypatch):
    # The fake answers the first call (a Write) and goes away during the second, as a server that
    # stops does. OpenCode would retry it until turn_timeout_s (and fail here, as a timeout); its
    # log's "Cannot connect to API" ends the turn after a short grace, read as CONNECT (graph.nodes
    # stops the batch).
    # The grace (process.STUCK_GRACE_S, 5 s) is for a server that comes straight back; this one
    # never does, so 1 s ends the turn as surely (the grace itself: test_turn_stuck.py).
    monkeypatch.setattr(process, "STUCK_GRACE_S", 1.0)
    require_cli("opencode", INSTALL)
    api = going_away(FakeChatCompletionsAPI)
    env = offline_home(tmp_path / "home", api.base_url, FAKE_API_KEY)
    events: list[dict[str, Any]] = []
    try:
        turn = OpenCodeAgent(OpenCodeOptions(model=f"{PROVIDER}/{MODEL}", turn_timeout_s=60), env=env).run_turn(
            "Write wip.txt, then say done.", project, session_id="s-gone", resume=False, on_event=events.append)
    finally:
        api.stop()
    assert turn.is_error and turn.terminal_reason == "api_error", turn.error
    assert (turn.error or "").startswith("OpenCode could not reach the model API (Cannot connect to API)"), turn.error
    assert kind_of(turn.api_error_status, turn.error) == CONNECT
    assert "Nothing answered at the model API's address" in (turn.error or "")
    assert not any(e.get("type") == "timeout" for e in events)
    assert (project / "wip.txt").read_text() == WIP  # the work in progress is left in the project


def test_a_missing_cli_is_an_error_naming_the_install_command(project):
    agent = OpenCodeAgent(OpenCodeOptions(cli_path="/nonexistent/opencode"))
    with pytest.raises(CodingAgentError, match="npm install -g opencode-ai@1.18.33"):
        agent.run_turn("hi", project, session_id="s-6", resume=False)
