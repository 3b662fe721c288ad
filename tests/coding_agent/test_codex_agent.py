"""CodexAgent driving the REAL Codex CLI (0.171.0) against the fake Responses API."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.coding_agent.api_errors import CONNECT, kind_of
from orchestrator.coding_agent.codex import INSTALL, CodexAgent, CodexOptions, SessionMap
from orchestrator.errors import CodingAgentError
from orchestrator.fake_api import ScriptedResponder, api_error, reply, text, tool_use, working_directory
from orchestrator.fake_api.openai_responses import FakeResponsesAPI
from orchestrator.procs.orphans import MARK_VAR, stop_marked
from orchestrator.testing.clis import require_cli
from orchestrator.testing.gone import WIP, going_away
from orchestrator.testing.turn_processes import group_running
from tickets.procs import is_running

pytestmark = pytest.mark.cli


@pytest.fixture
def codex_cli() -> str:
    return require_cli("codex", INSTALL)


@pytest.fixture
def script() -> ScriptedResponder:
    return ScriptedResponder()


@pytest.fixture
def offline(codex_cli, script, tmp_path):
    with CodexAgent.offline(script, tmp_path / "codex-state") as off:
        yield off


@pytest.fixture
def make_agent(offline):
    def make(**overrides) -> CodexAgent:
        return CodexAgent(CodexOptions(**{**offline.options, **overrides}), env=offline.env)

    return make


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "proj").mkdir()
    return tmp_path / "proj"


def write_reply(relative: str, content: str):
    return lambda body: reply(text(f"Writing {relative}."),
                              tool_use("Write", {"file_path": f"{working_directory(body)}/{relative}",
                                                 "content": content}))


def test_a_turn_of_a_model_served_on_a_local_address_counts_unless_priced_free(script, make_agent, project):
    """The fake's provider is at 127.0.0.1, as a local ollama server or a LiteLLM proxy to a paid
    API would be: its tokens count for max_cost_usd (pricing.py) unless the user's price says 0."""
    script.coding_agent("Nothing to do.", "Nothing to do.")
    turn = make_agent().run_turn("Say hello.", project, session_id="s-local", resume=False)
    assert turn.is_error is False, turn.error
    assert turn.usage["input_tokens"] > 0 and turn.cost_usd > 0
    free = make_agent(price={"input": 0, "output": 0}).run_turn("Say hello.", project, session_id="s-free",
                                                                 resume=False)
    assert free.is_error is False and free.usage["input_tokens"] > 0 and free.cost_usd == 0.0


def test_a_turn_writes_a_file_in_the_worktree_and_streams_its_events(script, make_agent, project):
    script.coding_agent(write_reply("hello.txt", "hello\n"), "Created hello.txt.")
    events: list[dict] = []
    price = {"input": 2.0, "cached_input": 0.5, "output": 8.0}
    turn = make_agent(price=price).run_turn("Create hello.txt", project, session_id="s-one", resume=False,
                                            on_event=events.append)
    assert turn.is_error is False, turn.error
    assert (project / "hello.txt").read_text() == "hello\n"
    assert turn.text == "Created hello.txt." and turn.session_id == "s-one"
    usage = turn.usage
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    # Codex reports tokens only: the turn is priced from them, so max_cost_usd can stop a run.
    cached = usage.get("cached_input_tokens", 0)
    assert turn.cost_usd == pytest.approx(
        ((usage["input_tokens"] - cached) * 2.0 + cached * 0.5 + usage["output_tokens"] * 8.0) / 1e6)
    assert turn.cost_usd > 0 and events[-1]["cost_usd"] == turn.cost_usd
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["start", "init"] and kinds[-1] == "result"
    use = next(e for e in events if e["type"] == "tool_use")
    assert use["name"] == "Write" and use["input"]["file_path"] == str(project / "hello.txt")
    assert next(e for e in events if e["type"] == "tool_result")["is_error"] is False
    assert [e["text"] for e in events if e["type"] == "text"] == ["Writing hello.txt.", "Created hello.txt."]


def test_an_edit_and_a_command_run_through_codex_tools(script, make_agent, project):
    (project / "a.py").write_text("x = 1\ny = 2\nz = 3\n")
    script.coding_agent(reply(tool_use("Edit", {"file_path": str(project / "a.py"), "old_string": "y = 2",
                                                "new_string": "y = 20\nw = 4"})),
                        # A reply of its own: calls of one reply may run in parallel.
                        reply(tool_use("Bash", {"command": "wc -l < a.py > lines.txt"})), "Edited.")
    turn = make_agent().run_turn("edit it", project, session_id="s-edit", resume=False)
    assert turn.is_error is False, turn.error
    assert (project / "a.py").read_text() == "x = 1\ny = 20\nw = 4\nz = 3\n"
    assert (project / "lines.txt").read_text().strip() == "4"  # the command ran after the edit, in cwd


def test_the_second_turn_resumes_the_session_and_its_request_carries_the_first(script, make_agent, offline,
                                                                               project):
    agent = make_agent()
    script.coding_agent(write_reply("one.txt", "1\n"), "Turn one done.")
    assert agent.run_turn("FIRST-PROMPT", project, session_id="s-two", resume=False).is_error is False
    script.coding_agent("Turn two done.")
    second = agent.run_turn("SECOND-PROMPT", project, session_id="s-two", resume=True)
    assert second.is_error is False, second.error
    assert second.text == "Turn two done."
    last = offline.requests()[-1]
    said = [b.get("text") for m in last["messages"] for b in m["content"] if b["type"] == "text"]
    assert "FIRST-PROMPT" in said and "Turn one done." in said and said[-1] == "SECOND-PROMPT"
    uses = [b for m in last["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert [u["name"] for u in uses] == ["Write"]


def test_a_retried_first_turn_resumes_the_thread_it_already_made(script, make_agent, offline, project):
    agent = make_agent()
    assert agent.run_turn("FIRST", project, session_id="s-retry", resume=False).is_error is False
    # The same turn again after a crash: the caller still says resume=False.
    again = agent.run_turn("FIRST AGAIN", project, session_id="s-retry", resume=False)
    assert again.is_error is False
    said = [b.get("text") for m in offline.requests()[-1]["messages"] for b in m["content"] if b["type"] == "text"]
    assert said[0] == "FIRST" and said[-1] == "FIRST AGAIN"


def test_resuming_a_session_codex_never_started_is_session_lost(make_agent, project):
    turn = make_agent().run_turn("again", project, session_id="s-never", resume=True)
    assert turn.is_error is True and "to resume here" in (turn.error or "")  # graph.rounds.session_lost


def test_a_recorded_thread_codex_no_longer_has_is_session_lost(make_agent, offline, project):
    # E.g. CODEX_HOME was cleaned, or the run moved to another machine: the record outlived the thread.
    SessionMap(Path(offline.env["CODEX_HOME"])).put("s-gone", "01a221c1-0000-70f3-af4f-77debb926c4c")
    turn = make_agent().run_turn("again", project, session_id="s-gone", resume=True)
    assert turn.is_error is True and "to resume here" in (turn.error or "")
    assert turn.terminal_reason == "session_lost"


def test_a_corrupt_session_record_is_an_error_naming_it(make_agent, offline, project):
    record = SessionMap(Path(offline.env["CODEX_HOME"]))._path("s-bad")
    record.parent.mkdir(parents=True)
    record.write_text("../../etc/passwd")
    turn = make_agent().run_turn("again", project, session_id="s-bad", resume=True)
    assert turn.is_error is True and str(record) in (turn.error or "")


def test_a_write_outside_the_worktree_is_refused(script, make_agent, tmp_path, project):
    outside, shell_outside = tmp_path / "outside.txt", tmp_path / "shell-outside.txt"
    script.coding_agent(reply(tool_use("Write", {"file_path": str(outside), "content": "escaped\n"}),
                              tool_use("Bash", {"command": f"echo escaped > {shell_outside}; echo ok > inside.txt"})),
                        "Tried.")
    turn = make_agent().run_turn("write outside", project, session_id="s-out", resume=False)
    assert turn.is_error is False, turn.error
    assert not outside.exists() and not shell_outside.exists()
    assert (project / "inside.txt").read_text() == "ok\n"  # the same shell could write in the worktree
    assert [d["tool"] for d in turn.permission_denials] == ["apply_patch"]


def marked(session_id: str) -> list[int]:
    """Live processes carrying this session's orphan marker."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"{MARK_VAR}={session_id} ".encode() in environ and state != "Z":
            found.append(int(entry))
    return found


def test_the_turn_timeout_kills_codex_and_its_shell(script, make_agent, project):
    release = threading.Event()
    # Should Codex hand the model the still-running shell early, the model's next answer is held too.
    script.coding_agent(reply(tool_use("Bash", {"command": "sleep 97"})), lambda body: (release.wait(60), "late")[1])
    events: list[dict] = []
    try:
        turn = make_agent(turn_timeout_s=4).run_turn("slow", project, session_id="s-slow", resume=False,
                                                     on_event=events.append)
    finally:
        release.set()
    assert turn.is_error is True and turn.terminal_reason == "timeout"
    assert "within 4 s" in (turn.error or "")
    pid = next(e["pid"] for e in events if e["type"] == "start")
    assert group_running(pid) == set()  # at once: the turn returns when nothing of it runs
    assert marked("s-slow") == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc and prctl")
def test_codex_dies_with_a_killed_middle_and_leaves_nothing_a_takeover_cannot_stop(script, offline, project,
                                                                                    tmp_path):
    script.coding_agent(reply(tool_use("Bash", {"command": "sleep 98"})))
    driver = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from orchestrator.coding_agent.codex import CodexAgent, CodexOptions
        CodexAgent(CodexOptions(**{offline.options!r}), env={offline.env!r}).run_turn(
            "hang", __import__("pathlib").Path({str(project)!r}), session_id="s-kill", resume=False)
        """)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("sleep 98" in _cmdline(p) for p in marked("s-kill")):
            time.sleep(0.1)
        assert any("sleep 98" in _cmdline(p) for p in marked("s-kill")), "the shell never started"
        driver.send_signal(signal.SIGKILL)  # `middle` killed mid-turn
        driver.wait()
        codex = [p for p in marked("s-kill") if "sleep" not in _cmdline(p)]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(is_running(p) for p in codex):
            time.sleep(0.1)
        assert not any(is_running(p) for p in codex), "Codex outlived the middle that started it"
        stop_marked(["s-kill"], owner="dead")  # what the next `middle` does for a dead run
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and marked("s-kill"):
            time.sleep(0.1)
        assert marked("s-kill") == []
    finally:
        if driver.poll() is None:
            driver.kill()
        for pid in marked("s-kill"):
            os.kill(pid, signal.SIGKILL)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


@pytest.mark.parametrize("status", [400, 401, 500, 503])
def test_an_api_error_ends_the_turn_with_a_sentence_naming_its_status(script, make_agent, project, status):
    script.coding_agent(api_error(status, "scripted model failure"))
    turn = make_agent().run_turn("hi", project, session_id=f"s-err-{status}", resume=False)
    assert turn.is_error is True and turn.terminal_reason == "api_error"
    # The model API's status is recorded and said, as for the other agents' API errors (Codex passes
    # a 400 on as the response body alone: its shape is what says 400, codex_events._readable).
    said = f" (HTTP {status})"
    assert turn.api_error_status == status
    assert (turn.error or "").startswith(f"Codex could not get an answer from the model{said}: ")
    if status != 500:  # Codex words a 500 its own way ("high demand"), naming no status
        assert "scripted model failure" in (turn.error or "")
    if status == 401:
        assert "Check the API key" in (turn.error or "")
    if status >= 500:
        assert "The model API's server failed" in (turn.error or "")


# What Codex 0.171 prints for each error an OpenAI-compatible server answers (the fake, in
# OpenAI's shape), the status and kind middle reads from it, and what the user is told to do
# (orchestrator/coding_agent/api_errors.py; the table in docs/coding-agent.md).
CODEX_ERRORS = [
    # status, type, code, message: Codex's words, status read, what to do
    (401, None, None, "Incorrect API key provided", "unexpected status 401 Unauthorized", 401, "Check the API key"),
    (403, None, None, "forbidden", "unexpected status 403 Forbidden", 403, "Check the API key"),
    (404, "invalid_request_error", "model_not_found", "The model `nope` does not exist or you do not have access "
     "to it.", "The model `nope` does not exist", 404, "The model was not found: set `[coding_agent.options] model`"),
    (404, None, None, "Not found", "unexpected status 404 Not Found", 404, "The model was not found"),
    (400, "invalid_request_error", "context_length_exceeded", "This model's maximum context length is 8192 tokens",
     "Codex ran out of room in the model's context window", None, "longer than the model's context window"),
    (413, None, None, "request too large", "unexpected status 413 Payload Too Large", 413,
     "longer than the model's context window"),
    (429, "requests", "rate_limit_exceeded", "Rate limit reached", "exceeded retry limit, last status: 429", 429,
     "Wait for the provider's rate limit"),
    (429, "insufficient_quota", "insufficient_quota", "You exceeded your current quota", "Quota exceeded", 429,
     "The account's quota is used up"),
    (502, None, None, "bad gateway", "unexpected status 502 Bad Gateway", 502, "The model API's server failed"),
]


@pytest.mark.parametrize("status, etype, code, message, words, read, todo", CODEX_ERRORS,
                         ids=[f"{c[0]}-{c[2] or 'plain'}" for c in CODEX_ERRORS])
def test_each_model_api_error_is_read_as_its_status_and_says_what_to_do(script, make_agent, project, status, etype,
                                                                       code, message, words, read, todo):
    script.coding_agent(*[api_error(status, message, etype, code=code)] * 6)  # (Codex retries a 429, a 5xx)
    turn = make_agent().run_turn("hi", project, session_id=f"s-kind-{status}-{code}", resume=False)
    assert turn.is_error is True and turn.terminal_reason == "api_error"
    assert turn.api_error_status == read
    said = f" (HTTP {read})" if read is not None else ""
    assert (turn.error or "").startswith(f"Codex could not get an answer from the model{said}: "), turn.error
    assert words in (turn.error or "") and todo in (turn.error or ""), turn.error


# Its own retries (the provider's default request and stream retries: "Reconnecting... waiting for
# network", where it would wait for ever, ends the turn), or none (offline()'s: the stream's failure at once).
GONE = [(None, "Reconnecting... waiting for network"), (0, "stream disconnected before completion")]


@pytest.mark.parametrize("retries, says", GONE, ids=["its-retries", "no-retries"])
def test_a_model_api_that_goes_away_mid_turn_ends_the_turn_at_once_as_unreachable(offline, make_agent, project,
                                                                                   retries, says):
    # The fake answers the first call (a write) and goes away during the second, as a server that
    # stops does. (turn_timeout_s: a turn left to wait would time out, and fail here.)
    api = going_away(FakeResponsesAPI)
    provider = {**offline.options["provider"], "base_url": api.base_url,
                "request_max_retries": retries, "stream_max_retries": retries}
    events: list[dict] = []
    try:
        turn = make_agent(provider=provider, turn_timeout_s=120).run_turn(
            "Write wip.txt, then say done.", project, session_id="s-gone", resume=False, on_event=events.append)
    finally:
        api.stop()
    assert turn.is_error and turn.terminal_reason == "api_error", turn.error
    assert (turn.error or "").startswith(f"Codex could not get an answer from the model: {says}"), turn.error
    assert kind_of(turn.api_error_status, turn.error) == CONNECT, turn.error
    assert "Nothing answered at the model API's address" in (turn.error or "")
    assert not any(e.get("type") == "timeout" for e in events)
    assert (project / "wip.txt").read_text() == WIP  # the work in progress is left in the project


def test_a_missing_cli_is_a_coding_agent_error_with_the_install_command(project, tmp_path):
    agent = CodexAgent(CodexOptions(cli_path=str(tmp_path / "no-codex")), env={"PATH": str(tmp_path)})
    with pytest.raises(CodingAgentError, match="npm install -g @openai/codex@0.171.0"):
        agent.run_turn("hi", project, session_id=None, resume=False)


@pytest.mark.parametrize("args", [["--dangerously-bypass-approvals-and-sandbox"], ["--sandbox", "danger-full-access"],
                                  ["-c", 'sandbox_mode="danger-full-access"'], ["-c", "approval_policy=on-request"],
                                  ["-c", 'sandbox_workspace_write.writable_roots=["/"]'],
                                  ["--config=sandbox_mode=danger-full-access"], ["--sandbox=danger-full-access"]])
def test_options_that_would_lift_the_sandbox_are_refused(args):
    with pytest.raises(ValidationError, match="sandbox"):
        CodexOptions(extra_args=args)
    with pytest.raises(ValidationError):
        CodexOptions(sandbox="danger-full-access")
    with pytest.raises(ValidationError):
        CodexOptions(unknown=1)


def test_the_session_record_is_one_file_per_session_inside_its_folder(tmp_path):
    sessions = SessionMap(tmp_path)
    sessions.put("s-1", "01a221c1-4317-70f3-af4f-77debb926c4c")
    assert sessions.get("s-1") == "01a221c1-4317-70f3-af4f-77debb926c4c" and sessions.get("s-2") is None
    for odd in ("..", ".", "a/../../b"):  # stored ids are not trusted to be file names
        assert sessions._path(odd).parent == tmp_path / "middle-sessions"
    sessions.put("s-3", "not a thread id; rm -rf")  # an odd id from Codex is not recorded
    assert sessions.get("s-3") is None
