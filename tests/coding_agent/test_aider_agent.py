"""aider as a coding agent, with the real aider (0.86.2) on the fake Chat Completions API: the contract
kit, and what is aider's own (nothing of it in the work tree, the write guard, a command-looking
prompt, tokens and cost, a lost session). Each aider turn takes seconds: it imports litellm first."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.coding_agent import process
from orchestrator.coding_agent.aider import AiderAgent, AiderOptions
from orchestrator.coding_agent.aider_launch import INSTALL_HINT
from orchestrator.coding_agent.api_errors import CONNECT, kind_of
from orchestrator.errors import CodingAgentError
from orchestrator.fake_api import ScriptedResponder, api_error, reply, text, tool_use
from orchestrator.fake_api.aider_chat import FakeAiderAPI
from orchestrator.fake_api.messages import last_user_text
from orchestrator.graph.rounds import session_lost
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.testing import CodingAgentContract, builtin_harness, make_repo
from orchestrator.testing.clis import require_cli
from orchestrator.testing.gone import going_away


@pytest.fixture(scope="module")
def aider_cli() -> str:
    return require_cli("aider", INSTALL_HINT)


@pytest.mark.slow
class TestAiderContract(CodingAgentContract):
    turn_timeout_s = 20.0  # aider takes seconds to start before it asks its model (longer on a busy machine)

    @pytest.fixture
    def harness(self, tmp_path, aider_cli):
        with builtin_harness("aider", tmp_path) as harness:
            yield harness


@pytest.fixture
def project(tmp_path) -> Path:
    return make_repo(tmp_path / "project", {"README.md": "# project\n"}).resolve()


@pytest.fixture
def offline(tmp_path, aider_cli):
    script = ScriptedResponder()
    with AiderAgent.offline(script, tmp_path / "offline") as off:
        def make(**overrides):
            return AiderAgent(AiderOptions(**{**off.options, **overrides}), env=dict(off.env))
        yield make, script, off


def git(project: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=project, capture_output=True, text=True).stdout


@pytest.mark.slow
def test_a_turn_leaves_only_its_edit_in_the_worktree_and_reports_tokens_and_cost(project, offline):
    make, script, _ = offline
    script.coding_agent(reply(text("Writing it."), tool_use("Write", {"file_path": str(project / "hello.txt"),
                                                                      "content": "hello\n"})), "Wrote hello.txt.")
    events: list[dict] = []
    session = str(uuid.uuid4())
    turn = make().run_turn("Write hello.txt.", project, session_id=session, resume=False, on_event=events.append)
    assert turn.is_error is False, turn.error
    assert turn.text.startswith("Writing it.") and turn.text.endswith("Applied edit to hello.txt")
    # Only the file it wrote (aider stages it empty, then writes it): no .aider* files, no .gitignore edit, no commit.
    assert sorted(git(project, "status", "--porcelain", "--untracked-files=all").splitlines()) == ["AM hello.txt"]
    assert git(project, "log", "--format=%s").split() == ["initial"]
    assert git(project, "config", "--local", "--get", "user.name") == ""  # aider wrote no "Your Name"
    # The session lives in the git directory, outside the work tree.
    assert (project / ".git" / "middle-aider" / session / "chat.md").is_file()
    # Tokens and cost from its "Tokens: ... Cost: $..." line (the offline model has prices).
    assert turn.usage["input_tokens"] > 0 and turn.usage["output_tokens"] > 0 and turn.cost_usd > 0
    assert turn.num_turns == 1
    edits = [e for e in events if e["type"] == "tool_use"]
    assert edits == [{"type": "tool_use", "name": "Edit", "id": "aider-edit-1",
                      "input": {"file_path": str(project / "hello.txt")}}]
    assert [e["type"] for e in events][0] == "start" and events[-1]["type"] == "result"
    assert any(e["type"] == "text" and "Writing it." in e["text"] for e in events)


@pytest.mark.slow
def test_without_the_guard_aider_itself_creates_a_file_outside(project, offline, tmp_path):
    """Why the guard exists: aider 0.86.2 touches a new `../` file before git refuses to add it."""
    make, script, _ = offline
    outside = tmp_path / "outside.txt"
    script.coding_agent(reply(tool_use("Write", {"file_path": str(outside), "content": "escaped\n"})), "Tried.")
    turn = make(confine_to_project=False).run_turn("Write outside.", project, session_id="unguarded", resume=False)
    assert outside.exists() and turn.permission_denials == []
    script.coding_agent(reply(tool_use("Write", {"file_path": str(tmp_path / "again.txt"), "content": "x\n"})),
                        "Tried again.")
    guarded = make().run_turn("Write outside.", project, session_id="guarded", resume=False)
    assert not (tmp_path / "again.txt").exists()
    assert guarded.permission_denials == [{"tool": "Edit", "target": str(tmp_path / "again.txt")}]


@pytest.mark.slow
def test_a_prompt_that_looks_like_an_aider_command_is_sent_as_a_message(project, offline):
    make, script, off = offline
    script.coding_agent("I will not run that.")
    turn = make().run_turn("!touch pwned.txt", project, session_id="bang", resume=False)
    assert turn.is_error is False, turn.error
    assert not (project / "pwned.txt").exists()
    assert last_user_text(off.requests()[-1]).strip() == "!touch pwned.txt"


def test_resuming_a_session_this_machine_does_not_have_is_a_lost_session(project, aider_cli):
    turn = AiderAgent().run_turn("Go on.", project, session_id="never-started", resume=True)
    assert turn.is_error and session_lost(turn), turn.error


@pytest.mark.slow
def test_a_model_api_that_goes_away_mid_turn_ends_the_turn_as_unreachable_with_its_edit_kept(project, offline,
                                                                                              monkeypatch):
    """aider's second call of a turn (its fix of the lint error its first edit made) meets a server
    gone away: it would retry "Connection error." for retry_timeout_s (60 s, over two minutes with
    litellm's own retries); the turn ends soon after aider first says it, as CONNECT, the edit kept.
    (turn_timeout_s: a turn left to aider's retries would end with its own words, and fail here.)"""
    # The grace (process.STUCK_GRACE_S, 5 s) is for a server that comes straight back; this one
    # never does, so 1 s ends the turn as surely (the grace itself: test_turn_stuck.py).
    monkeypatch.setattr(process, "STUCK_GRACE_S", 1.0)
    make, _, off = offline
    broken = "def half(:\n"  # aider lints what it wrote and asks the model again to fix it
    api = going_away(FakeAiderAPI, name="wip.py", content=broken, then=("Wrote wip.py.",),
                     directory=lambda body: str(project))
    events: list[dict] = []
    try:
        turn = make(openai_api_base=api.base_url, retry_timeout_s=60, turn_timeout_s=300).run_turn(
            "Write wip.py, then say done.", project, session_id=str(uuid.uuid4()), resume=False,
            on_event=events.append)
    finally:
        api.stop()
    assert len(api.requests) == 2 and turn.is_error and turn.terminal_reason == "api_error", turn.error
    assert (turn.error or "").startswith("aider could not reach the model API (InternalServerError: OpenAIException "
                                         "- Connection error.) and kept retrying, so the turn was ended."), turn.error
    assert kind_of(turn.api_error_status, turn.error) == CONNECT, turn.error
    assert "Nothing answered at the model API's address" in (turn.error or "")
    assert not any(e.get("type") == "timeout" for e in events)
    assert (project / "wip.py").read_text() == broken  # the work in progress is left in the project


def test_a_missing_aider_is_an_error_with_the_install_command(project, tmp_path):
    with pytest.raises(CodingAgentError, match="pip install aider-chat==0.86.2"):
        AiderAgent(env={"PATH": str(tmp_path)}).run_turn("Hi.", project, session_id="s", resume=False)
    with pytest.raises(CodingAgentError, match="cli_path.*pip install aider-chat==0.86.2"):
        AiderAgent(AiderOptions(cli_path=str(tmp_path / "aider"))).run_turn("Hi.", project, session_id="s",
                                                                            resume=False)


def test_a_script_without_a_python_line_needs_the_python_option(project, tmp_path):
    cli = tmp_path / "aider"
    cli.write_text("#!/bin/sh\nexit 0\n")
    cli.chmod(0o755)
    with pytest.raises(CodingAgentError, match="set `\\[coding_agent.options\\] python`"):
        AiderAgent(AiderOptions(cli_path=str(cli))).run_turn("Hi.", project, session_id="s", resume=False)


def test_the_options_are_strict_and_aider_is_registered():
    with pytest.raises(ValidationError):
        AiderOptions(auto_commits=True)
    with pytest.raises(ValidationError, match="relative"):
        AiderOptions(sessions_dir="aider-sessions")
    assert AiderAgent(AiderOptions(sessions_dir="~/s")).session_dir(Path("/p"), "a/b") == Path.home() / "s" / "a_b"
    assert PluginRegistry(load_entry_points=False).coding_agent_class("aider") is AiderAgent
    assert all(f.description for f in AiderOptions.model_fields.values())


def test_doctor_says_where_aider_is_or_how_to_install_it(aider_cli):
    where, problem = AiderAgent.doctor(AiderOptions())
    assert problem is None and where.startswith(aider_cli) and "0.86.2" in where
    where, problem = AiderAgent.doctor(AiderOptions(cli_path="/nonexistent/aider"))
    assert where == "-" and problem is not None and "pip install aider-chat==0.86.2" in problem


def test_aiders_python_is_read_from_its_script(tmp_path):
    from orchestrator.coding_agent.aider_launch import interpreter_of

    plain = tmp_path / "plain"
    plain.write_text("#!/opt/venv/bin/python3\nimport sys\n")
    assert interpreter_of(str(plain), None, None) == "/opt/venv/bin/python3"
    long = tmp_path / "long"  # what pip writes when the venv's path is too long for a #! line
    long.write_text("#!/bin/sh\n'''exec' \"/a long/venv/bin/python\" \"$0\" \"$@\"\n' '''\nimport sys\n")
    assert interpreter_of(str(long), None, None) == "/a long/venv/bin/python"
    assert interpreter_of(str(long), "/given/python", None) == "/given/python"


# What aider (litellm) prints for each status its fake (OpenAI's Chat Completions shape) answers,
# the status middle reads from litellm's exception name, and what the user is told to do
# (orchestrator/coding_agent/api_errors.py; the table in docs/coding-agent.md). A 403 and a 413
# are litellm's APIError, naming no status (probed by hand: docs/coding-agent.md says so).
AIDER_ERRORS = [
    (401, None, "bad key", "AuthenticationError, HTTP 401", 401, "Check the API key"),
    (404, None, "The model `nope` does not exist", "NotFoundError, HTTP 404", 404,
     "The model was not found: set `[coding_agent.options] model`"),
    (400, "context_length_exceeded", "This model's maximum context length is 8192 tokens", "the chat is too long",
     None, "longer than the model's context window"),
    (429, None, "Rate limit reached", "RateLimitError, HTTP 429", 429, "Wait for the provider's rate limit"),
    (503, None, "overloaded", "ServiceUnavailableError, HTTP 503", 503, "The model API's server failed"),
]


@pytest.mark.parametrize("status, code, message, words, read, todo", AIDER_ERRORS,
                         ids=[str(c[0]) for c in AIDER_ERRORS])
def test_each_model_api_error_is_read_as_its_status_and_says_what_to_do(project, offline, status, code, message, words,
                                                                       read, todo):
    make, script, _ = offline
    quick = {"retry-after-ms": "10", "retry-after": "0"}
    script.coding_agent(*[api_error(status, message, code, headers=quick)] * 12)  # (litellm retries some)
    turn = make().run_turn("Hello.", project, session_id=str(uuid.uuid4()), resume=False)
    assert turn.is_error and turn.api_error_status == read, turn.error
    assert (turn.error or "").startswith("aider could not get an answer from the model"), turn.error
    assert words in (turn.error or "") and todo in (turn.error or ""), turn.error
