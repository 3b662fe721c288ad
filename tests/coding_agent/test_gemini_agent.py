"""The Gemini CLI coding agent with the real CLI (`gemini` 0.61.0) on the fake Gemini API."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.coding_agent import process
from orchestrator.coding_agent.api_errors import CONNECT, kind_of
from orchestrator.coding_agent.gemini import INSTALL_COMMAND, GeminiAgent
from orchestrator.errors import CodingAgentError
from orchestrator.fake_api import ScriptedResponder, api_error, reply, text, tool_use
from orchestrator.fake_api.gemini import FakeGeminiAPI
from orchestrator.fake_api.gemini_env import OFFLINE_MODEL, gemini_env, offline_home
from orchestrator.fake_api.messages import content_text, working_directory
from orchestrator.graph.rounds import session_lost
from orchestrator.procs.orphans import MARK_VAR
from orchestrator.testing import make_repo
from orchestrator.testing.clis import require_cli
from orchestrator.testing.gone import WIP, going_away

pytestmark = pytest.mark.slow  # the real Gemini CLI: seconds a turn


@pytest.fixture
def gemini_cli() -> str:
    return require_cli("gemini", INSTALL_COMMAND)


class Harness:
    def __init__(self, script: ScriptedResponder, options: dict[str, Any], env: dict[str, str], requests: Any):
        self.script, self.options, self.env, self.requests = script, options, env, requests

    def agent(self, **overrides: Any) -> GeminiAgent:
        return GeminiAgent(GeminiAgent.Options(**{**self.options, **overrides}), env=self.env)


@pytest.fixture
def gemini(gemini_cli, tmp_path) -> Iterator[Harness]:
    script = ScriptedResponder()
    with GeminiAgent.offline(script, tmp_path / "offline") as off:
        yield Harness(script, off.options, off.env, off.requests)


@pytest.fixture
def project(tmp_path) -> Path:
    return make_repo(tmp_path / "project", {"README.md": "# project\n"}).resolve()


def said(body: dict[str, Any]) -> str:
    return "\n".join(content_text(m.get("content")) for m in body.get("messages") or [])


def test_a_turn_on_a_local_gemini_base_url_counts_unless_priced_free(gemini, project):
    """GOOGLE_GEMINI_BASE_URL points at the fake on 127.0.0.1, as at a local server or a gateway to
    the paid API: the turn's tokens count for max_cost_usd (pricing.py) unless the price says 0."""
    gemini.script.coding_agent(reply("Nothing to do.", usage={"input_tokens": 1000, "output_tokens": 20}),
                               reply("Nothing to do.", usage={"input_tokens": 1000, "output_tokens": 20}))
    turn = gemini.agent().run_turn("Say hello.", project, session_id=str(uuid.uuid4()), resume=False)
    assert turn.is_error is False, turn.error
    assert turn.usage["input_tokens"] >= 1000 and turn.cost_usd > 0
    free = gemini.agent(price={"input": 0, "output": 0}).run_turn("Say hello.", project,
                                                                  session_id=str(uuid.uuid4()), resume=False)
    assert free.is_error is False and free.cost_usd == 0.0


def test_a_turn_writes_in_the_worktree_streams_its_tool_call_and_reports_tokens(gemini, project):
    gemini.script.coding_agent(
        lambda body: reply(text("Writing it."), tool_use("Write", {"file_path": f"{working_directory(body)}/hello.txt",
                                                                   "content": "hello\n"})),
        reply("Wrote hello.txt.", usage={"input_tokens": 1000, "output_tokens": 20}))
    events: list[dict[str, Any]] = []
    session = str(uuid.uuid4())
    turn = gemini.agent(price={"input": 1.0, "output": 10.0}).run_turn(
        "Write hello.txt saying hello.", project, session_id=session, resume=False, on_event=events.append)
    assert turn.is_error is False, turn.error
    assert (project / "hello.txt").read_text() == "hello\n"
    assert turn.text == "Wrote hello.txt." and turn.session_id == session
    assert turn.usage["output_tokens"] >= 20 and turn.usage["input_tokens"] >= 1000 and turn.num_turns == 2
    # The CLI reports tokens only: the turn is priced from them (no cache here: all input at 1.0).
    thoughts = max(turn.usage.get("total_tokens", 0) - turn.usage["input_tokens"] - turn.usage["output_tokens"], 0)
    assert turn.cost_usd == pytest.approx(
        (turn.usage["input_tokens"] * 1.0 + (turn.usage["output_tokens"] + thoughts) * 10.0) / 1e6)
    assert turn.cost_usd > 0 and events[-1]["cost_usd"] == turn.cost_usd
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["start", "init"] and "tool_use" in kinds and kinds[-1] == "result"
    use = next(e for e in events if e["type"] == "tool_use")
    assert use["name"] == "write_file" and use["input"]["file_path"] == str(project / "hello.txt")
    first, second = gemini.requests()
    assert Path(working_directory(first) or "").resolve() == project
    assert "Write hello.txt saying hello." in said(first)
    assert second["messages"][-1]["content"][0]["type"] == "tool_result"  # the turn after the tool ran


def test_the_next_turn_resumes_the_session_and_the_model_sees_the_first(gemini, project):
    gemini.script.coding_agent("Noted: PAPAYA-7.", "The word was PAPAYA-7.")
    agent, session = gemini.agent(), str(uuid.uuid4())
    first = agent.run_turn("Remember the word PAPAYA-7.", project, session_id=session, resume=False)
    assert first.is_error is False, first.error
    second = agent.run_turn("Which word?", project, session_id=session, resume=True)
    assert second.is_error is False, second.error
    assert second.text == "The word was PAPAYA-7."
    sent = said(gemini.requests()[-1])
    assert "Remember the word PAPAYA-7." in sent and "Noted: PAPAYA-7." in sent and "Which word?" in sent


def test_a_write_outside_the_worktree_is_refused(gemini, project, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    gemini.script.coding_agent(reply(tool_use("Write", {"file_path": str(outside / "escape.txt"),
                                                        "content": "escaped\n"})), "I could not write there.")
    turn = gemini.agent().run_turn("Write outside.", project, session_id=str(uuid.uuid4()), resume=False)
    assert not (outside / "escape.txt").exists() and not any(outside.iterdir())
    assert turn.permission_denials == [{"tool": "write_file", "target": str(outside / "escape.txt")}]
    result = gemini.requests()[-1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and "not in workspace" in result["content"].lower()


def test_an_api_error_is_a_failed_turn_with_a_sentence(gemini, project):
    gemini.script.coding_agent(api_error(500, "The fake model is down."))
    turn = gemini.agent().run_turn("Say hello.", project, session_id=str(uuid.uuid4()), resume=False)
    assert turn.is_error is True and turn.api_error_status == 500
    assert turn.error and turn.error.startswith("The Gemini CLI could not get an answer from the model (HTTP 500)")
    assert "The fake model is down" in turn.error


# What the Gemini CLI prints for each status its fake (Gemini's error shape) answers, the status
# middle reads (the CLI words a 404, 429 and 503 without it) and what the user is told to do
# (orchestrator/coding_agent/api_errors.py; the table in docs/coding-agent.md).
GEMINI_ERRORS = [
    (401, "bad key", '"code":401', 401, "Check the API key (GEMINI_API_KEY"),
    (403, "forbidden", '"code":403', 403, "Check the API key"),
    (404, "The model `nope` does not exist", "[API Error: The model `nope` does not exist]", 404,
     "The model was not found: set `[coding_agent.options] model`"),
    (400, "This model's maximum context length is 8192 tokens", '"code":400', 400,
     "longer than the model's context window"),
    (413, "request too large", '"code":413', 413, "longer than the model's context window"),
    (429, "Rate limit reached", "Please wait and try again later", 429, "Wait for the provider's rate limit"),
    (500, "boom", '"code":500', 500, "The model API's server failed"),
    (503, "The model is overloaded.", "[API Error: The model is overloaded.]", None, "The model API's server failed"),
]


@pytest.mark.parametrize("status, message, words, read, todo", GEMINI_ERRORS, ids=[str(c[0]) for c in GEMINI_ERRORS])
def test_each_model_api_error_is_read_as_its_status_and_says_what_to_do(gemini, project, status, message, words,
                                                                       read, todo):
    gemini.script.coding_agent(*[api_error(status, message)] * 12)  # (the CLI may retry)
    turn = gemini.agent().run_turn("Say hello.", project, session_id=str(uuid.uuid4()), resume=False)
    assert turn.is_error is True and turn.api_error_status == read, turn.error
    said = f" (HTTP {read})" if read is not None else ""
    assert (turn.error or "").startswith(f"The Gemini CLI could not get an answer from the model{said}: "), turn.error
    assert words in (turn.error or "") and todo in (turn.error or ""), turn.error


# Its own retries: none (offline_home's maxAttempts 1: its "fetch failed" result at once), or its
# default 10 (minutes of backoff, each retry logged on stderr: the turn is ended after a short grace).
GONE = [(1, "The Gemini CLI could not get an answer from the model: [API Error: exception TypeError: fetch failed"),
        (10, "The Gemini CLI could not reach the model API (exception TypeError: fetch failed sending request) "
             "and kept retrying, so the turn was ended.")]


@pytest.mark.parametrize("attempts, says", GONE, ids=["no-retries", "its-retries"])
def test_a_model_api_that_goes_away_mid_turn_ends_the_turn_at_once_as_unreachable(gemini_cli, tmp_path, project,
                                                                                   attempts, says, monkeypatch):
    # The fake answers the first call (a write) and goes away during the second, as a server that
    # stops does: the CLI's next attempts meet a closed port. (turn_timeout_s: a turn left to its
    # retries would time out, and fail here, rather than end as unreachable.)
    # The grace (process.STUCK_GRACE_S, 5 s) is for a server that comes straight back; this one
    # never does, so 1 s ends the turn as surely (the grace itself: test_turn_stuck.py).
    monkeypatch.setattr(process, "STUCK_GRACE_S", 1.0)
    api = going_away(FakeGeminiAPI)
    home = offline_home(tmp_path / "gemini-home")
    settings = home / ".gemini" / "settings.json"
    settings.write_text(json.dumps(_with_attempts(json.loads(settings.read_text()), attempts)))
    events: list[dict[str, Any]] = []
    try:
        agent = GeminiAgent(GeminiAgent.Options(home_dir=str(home), model=OFFLINE_MODEL, turn_timeout_s=60),
                            env=gemini_env(api.base_url, tmp_path))
        turn = agent.run_turn("Write wip.txt, then say done.", project, session_id=str(uuid.uuid4()), resume=False,
                              on_event=events.append)
    finally:
        api.stop()
    assert turn.is_error and turn.terminal_reason == "api_error", turn.error
    assert (turn.error or "").startswith(says), turn.error
    assert kind_of(turn.api_error_status, turn.error) == CONNECT, turn.error
    assert "Nothing answered at the model API's address" in (turn.error or "")
    assert not any(e.get("type") == "timeout" for e in events)
    assert (project / "wip.txt").read_text() == WIP  # the work in progress is left in the project


def _with_attempts(settings: dict[str, Any], attempts: int) -> dict[str, Any]:
    return {**settings, "general": {**settings.get("general", {}), "maxAttempts": attempts}}


def test_resuming_a_session_it_does_not_have_starts_over_as_the_graph_expects(gemini, project):
    turn = gemini.agent().run_turn("Go on.", project, session_id=str(uuid.uuid4()), resume=True)
    assert turn.is_error is True and session_lost(turn), turn.error
    assert gemini.requests() == []


def test_a_first_turn_run_again_after_a_crash_resumes_the_session_it_created(gemini, project):
    gemini.script.coding_agent("First try answered.", "Second try answered.")
    # Not a UUID (the graph's ids are): the CLI gets a UUID derived from it, the same both times.
    agent, session = gemini.agent(), f"ticket t1/run {uuid.uuid4().hex[:8]}"
    assert agent.run_turn("Turn one.", project, session_id=session, resume=False).is_error is False
    again = agent.run_turn("Turn one, again.", project, session_id=session, resume=False)
    assert again.is_error is False, again.error
    assert again.session_id == session
    assert "Turn one." in said(gemini.requests()[-1]) and "First try answered." in said(gemini.requests()[-1])


def test_a_missing_cli_names_the_install_command(tmp_path, project):
    with pytest.raises(CodingAgentError, match="npm install -g @google/gemini-cli@0.61.0"):
        GeminiAgent(env={"PATH": str(tmp_path)}).run_turn("hi", project, session_id=None, resume=False)
    with pytest.raises(CodingAgentError, match="cli_path.*npm install -g @google/gemini-cli"):
        GeminiAgent(GeminiAgent.Options(cli_path=str(tmp_path / "no-gemini"))).run_turn(
            "hi", project, session_id=None, resume=False)
    with pytest.raises(CodingAgentError, match="cli_path.*npm install -g @google/gemini-cli"):
        GeminiAgent.find_cli(GeminiAgent.Options(cli_path="no-such-gemini"))


def test_find_cli_names_the_installed_cli(gemini_cli):
    assert GeminiAgent.find_cli() == gemini_cli


def test_a_cli_without_a_sign_in_is_a_failed_turn_saying_how_to_sign_in(gemini, project, tmp_path):
    empty_home = tmp_path / "empty-home"
    empty_home.mkdir()
    turn = gemini.agent(home_dir=str(empty_home)).run_turn("hi", project, session_id=str(uuid.uuid4()),
                                                           resume=False)
    assert turn.is_error is True
    assert turn.error and turn.error.startswith("The Gemini CLI is not signed in: set GEMINI_API_KEY")
    assert gemini.requests() == []


def marked(session_id: str) -> list[int]:
    """The live processes carrying this turn's orphan marker."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = f.read().split(b"\0")
            except OSError:
                continue
            if any(item.startswith(f"{MARK_VAR}={session_id} ".encode()) for item in environ):
                found.append(int(entry))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_the_turn_is_one_cli_process_which_dies_with_middle(gemini, project):
    """Not the CLI's default relaunch into a child node: that grandchild would outlive a killed
    `middle` (the kernel ends only the process middle started) and run the turn on."""
    session = str(uuid.uuid4())
    seen: list[int] = []
    gemini.script.coding_agent(lambda body: seen.extend(marked(session)) or "Done.")
    events: list[dict[str, Any]] = []
    turn = gemini.agent().run_turn("hi", project, session_id=session, resume=False, on_event=events.append)
    assert turn.is_error is False, turn.error
    assert seen == [next(e["pid"] for e in events if e["type"] == "start")]


def test_an_included_directory_may_be_written_and_a_missing_one_is_refused(gemini, project):
    shared = project.parent / "shared"
    shared.mkdir()
    gemini.script.coding_agent(reply(tool_use("Write", {"file_path": str(shared / "lib.txt"), "content": "lib\n"})),
                               "Wrote it.")
    turn = gemini.agent(include_directories=["../shared"]).run_turn(
        "Write the shared file.", project, session_id=str(uuid.uuid4()), resume=False)
    assert turn.is_error is False and turn.permission_denials == [], turn
    assert (shared / "lib.txt").read_text() == "lib\n"
    with pytest.raises(CodingAgentError, match="include_directories.*does not exist"):
        gemini.agent(include_directories=["../nowhere"]).run_turn("hi", project, session_id=None, resume=False)


def test_the_clis_own_model_choice_works_offline_too(gemini, project):
    """With no `model` the CLI first asks a router model for a JSON complexity score (a side call
    without tools, on the fake's "aux" channel, answered with the schema's smallest object)."""
    gemini.script.coding_agent("Routed and answered.")
    turn = gemini.agent(model=None).run_turn("hi", project, session_id=str(uuid.uuid4()), resume=False)
    assert turn.is_error is False, turn.error
    assert turn.text == "Routed and answered." and len(gemini.requests()) == 1
