"""The failures of tests/agent/test_provider_failures.py for the two providers that reach the model
through a CLI: `claude-code` (the real Claude Code on the fake Messages API) and `codex` (the real
Codex CLI on the fake Responses API). Each CLI retries by its own rules, bounded here as a user
would bound them (CLAUDE_CODE_MAX_RETRIES, Codex's request_max_retries); `[agent] timeout_s`
bounds the whole call. The table in docs/providers.md names these tests.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from orchestrator.agent.middle_agent import MiddleAgent
from orchestrator.agent.providers import build_agent_llm
from orchestrator.config.settings import AgentConfig
from orchestrator.errors import AgentReplyError, ModelAccessError
from orchestrator.fake_api import api_error, claude_code_env
from orchestrator.fake_api.openai_responses import FakeResponsesAPI
from orchestrator.fake_api.replies import broken_reply
from orchestrator.fake_api.server import FakeMessagesAPI
from orchestrator.testing.clis import require_cli

pytestmark = pytest.mark.cli

TICKET = {"id": "t1", "project_id": "p", "title": "Add hello", "description": "Make hello.py",
          "project_path": "/tmp/p"}
PLAN = json.dumps({"prompt": "Write hello.py"})
SOON = {"retry-after": "0"}
KEY_VAR = "CODEX_FAILURES_TEST_KEY"


@dataclass
class Setup:
    provider: str
    fake: Any
    agent: dict[str, Any]

    def build(self, **more: Any) -> MiddleAgent:
        return MiddleAgent(build_agent_llm(AgentConfig(**{**self.agent, **more})))

    def calls(self) -> int:
        return len(self.fake.requests_for("agent"))


@pytest.fixture(params=["claude-code", "codex"])
def setup(request, monkeypatch, tmp_path) -> Iterator[Setup]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    if request.param == "claude-code":
        cli = request.getfixturevalue("claude_cli")
        with FakeMessagesAPI() as api:
            # one retry of a transient answer, as CLAUDE_CODE_MAX_RETRIES=1 says (10, minutes apart, unset)
            for key, value in claude_code_env(api.base_url, tmp_path / "cc", max_retries=1).items():
                monkeypatch.setenv(key, value)
            yield Setup("claude-code", api, {"provider": "claude-code", "cli_path": cli})
        return
    cli = require_cli("codex", "npm install -g @openai/codex@0.171.0")
    for name in ("codex-home", "home"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    # one retry of a failed request or stream (Codex's defaults: 4 and 5, with backoff)
    (tmp_path / "codex-home" / "config.toml").write_text(
        "[model_providers.middle]\nrequest_max_retries = 1\nstream_max_retries = 1\n")
    monkeypatch.setenv(KEY_VAR, "sk-fake-local")
    with FakeResponsesAPI() as api:
        yield Setup("codex", api, {"provider": "codex", "model": "gpt-5.5", "cli_path": cli,
                                   "base_url": api.base_url, "api_key_env": KEY_VAR})


def name(setup: Setup) -> str:
    return f"provider {setup.provider}: "


@pytest.mark.parametrize("status, message, error, needle", [
    (400, "prompt is too long: 250000 tokens > 200000 maximum context length", AgentReplyError,
     r"the ticket's context is too long for model .*set \[agent\] model to one with a longer context window"),
    (401, "invalid x-api-key", ModelAccessError, r"cannot use a model .*(/login|codex login)"),
    (403, "forbidden", ModelAccessError, r"cannot use a model .*(/login|codex login)"),
    (404, "model: the model does not exist", ModelAccessError, r"model '.*' was not found .*set \[agent\] model"),
])
def test_a_refusal_is_one_error_naming_the_provider_and_what_to_set(setup, status, message, error, needle):
    setup.fake.script.agent(*[api_error(status, message)] * 3)
    with pytest.raises(error, match=needle) as raised:
        setup.build().plan(TICKET, "")
    assert str(raised.value).startswith(name(setup))
    assert setup.calls() <= 2  # the CLI's own one retry at most


@pytest.mark.parametrize("status", [429, 529])
def test_a_transient_answer_is_retried_by_the_cli_and_the_next_answer_used(setup, status):
    setup.fake.script.agent(api_error(status, "scripted", headers=SOON), PLAN)
    assert setup.build().plan(TICKET, "") == "Write hello.py"
    assert setup.calls() == 2


@pytest.mark.parametrize("status", [429, 503, 529])
def test_a_transient_answer_that_persists_ends_within_the_clis_cap(setup, status):
    setup.fake.script.agent(*[api_error(status, "scripted overload", headers=SOON)] * 6)
    with pytest.raises(AgentReplyError, match=rf"^{name(setup)}.*{status}.*try again later with `middle resume`"):
        setup.build().plan(TICKET, "")
    assert 2 <= setup.calls() <= 4  # a retry (Codex: of the request, then of the stream), then given up


def test_a_reply_held_past_the_timeout_is_one_error_naming_the_timeout(setup):
    def slow(_body):
        time.sleep(5)  # (in the fake's thread: the test itself waits timeout_s)
        return PLAN
    setup.fake.script.agent(slow, slow)
    with pytest.raises(AgentReplyError, match=rf"^{name(setup)}.* did not answer within 2 s.*\[agent\] timeout_s"):
        setup.build(timeout_s=2).plan(TICKET, "")


def test_a_server_gone_is_one_error_saying_it_cannot_be_reached(setup):
    setup.fake.stop()  # nothing listens there: connection refused
    # Codex would wait for the network for ever: its "waiting for network" ends the call at once,
    # long before timeout_s (which would say "did not answer" instead)
    with pytest.raises(ModelAccessError, match=rf"^{name(setup)}.*cannot reach .*check the network"):
        setup.build(timeout_s=60).plan(TICKET, "")


@pytest.mark.parametrize("broken", [
    broken_reply("<html><body>502 Bad Gateway</body></html>"),
    broken_reply('{"id": "msg_01", "content": [', cut=True),
], ids=["not-json", "connection-cut"])
def test_a_reply_that_cannot_be_read_is_one_error_naming_the_provider(setup, broken):
    setup.fake.script.agent(*[broken] * 4)
    with pytest.raises(AgentReplyError, match=rf"^{name(setup)}.*`middle resume`") as raised:
        setup.build().plan(TICKET, "")
    assert not isinstance(raised.value, ModelAccessError)
    assert setup.calls() <= 3
