"""Every way a provider's model call can fail, per provider, through its real client on its fake:
what the middle agent raises (one line naming the provider and what to do), and how many
requests it took (a retry of a retryable answer, none of a refusal, a cap on both). The table in
docs/providers.md ("When the model call fails") names these tests.

Retryable answers carry a short `retry-after` (the SDKs wait what it says instead of their
backoff), so the cap is reached in well under a second; a timeout is a fake that holds its reply
past a small `[agent] timeout_s`.
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
from orchestrator.fake_api import api_error
from orchestrator.fake_api.cloud import bedrock_env, google_service_account_file, vertex_env
from orchestrator.fake_api.openai_chat import FakeChatCompletionsAPI
from orchestrator.fake_api.replies import broken_reply
from orchestrator.fake_api.server import FakeMessagesAPI

TICKET = {"id": "t1", "project_id": "p", "title": "Add hello", "description": "Make hello.py",
          "project_path": "/tmp/p"}
PLAN = json.dumps({"prompt": "Write hello.py"})
RETRIES = 3  # what a run builds its model with (services.py: build_agent_llm's default)
SOON = {"retry-after": "0.01"}  # seconds, as the header allows; the SDKs wait that instead of backing off

HTTP_PROVIDERS = ["anthropic", "bedrock", "vertex", "openai-compatible"]
# How each provider names itself in its error lines.
NAMES = {"anthropic": "the Messages API", "bedrock": "Amazon Bedrock", "vertex": "Google Vertex AI",
         "openai-compatible": "provider openai-compatible"}


@dataclass
class Setup:
    provider: str
    fake: Any  # FakeMessagesAPI or FakeChatCompletionsAPI
    agent: dict[str, Any]

    def build(self, *, retries: int = RETRIES, **more: Any) -> MiddleAgent:
        return MiddleAgent(build_agent_llm(AgentConfig(**{**self.agent, **more}), max_retries=retries))

    def calls(self) -> int:
        """The model calls the fake received (not Google's token requests)."""
        return len([r for r in self.fake.requests if r.path != "/token"])


@pytest.fixture(params=HTTP_PROVIDERS)
def setup(request, monkeypatch, tmp_path) -> Iterator[Setup]:
    provider = request.param
    if provider == "openai-compatible":
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        with FakeChatCompletionsAPI() as chat:
            yield Setup(provider, chat, {"provider": provider, "model": "m", "base_url": chat.base_url})
        return
    with FakeMessagesAPI() as api:
        agent: dict[str, Any] = {"provider": provider, "base_url": api.base_url}
        if provider == "anthropic":
            monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-fake-local")
        elif provider == "bedrock":
            for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK"):
                monkeypatch.delenv(var, raising=False)
            for key, value in bedrock_env().items():
                monkeypatch.setenv(key, value)
        else:
            for var in ("ANTHROPIC_VERTEX_PROJECT_ID", "GOOGLE_CLOUD_PROJECT"):
                monkeypatch.delenv(var, raising=False)
            key_file = google_service_account_file(tmp_path / "sa.json", f"{api.base_url}/token", "adc-project")
            for name, value in vertex_env(key_file).items():
                monkeypatch.setenv(name, value)
            agent["base_url"] = f"{api.base_url}/v1"
        yield Setup(provider, api, agent)


# -- refusals: said at once, never retried -----------------------------------------------------------
@pytest.mark.parametrize("status, message, error, needle", [
    (400, "prompt is too long: 250000 tokens > 200000 maximum", AgentReplyError,
     r"refused the request \(400: prompt is too long.*\): the ticket's context is too long"),
    (401, "invalid x-api-key", ModelAccessError, r"rejected the .* \(401\)"),
    (403, "not allowed to use this model", ModelAccessError, r"rejected the .* \(403\)"),
    (404, "model: claude-nope", ModelAccessError, r"model 'claude-nope' was not found.*set \[agent\] model"),
])
def test_a_refusal_is_one_error_naming_the_provider_and_is_not_retried(setup, status, message, error, needle):
    setup.fake.script.agent(api_error(status, message))
    agent = setup.build(model="claude-nope")
    with pytest.raises(error, match=needle) as raised:
        agent.plan(TICKET, "")
    assert NAMES[setup.provider] in str(raised.value)
    assert setup.calls() == 1  # a refusal is final: asked once


def test_another_bad_request_says_what_to_check_and_is_not_retried(setup):
    setup.fake.script.agent(*[api_error(400, "max_tokens: 99999 > 8192, the maximum for this model")] * 2)
    with pytest.raises(AgentReplyError, match=r"refused the request \(400: max_tokens: 99999 > 8192.*\); check "
                                              r"\[agent\] model and (max_tokens|json_schema)") as raised:
        setup.build().plan(TICKET, "")
    assert NAMES[setup.provider] in str(raised.value) and not isinstance(raised.value, ModelAccessError)
    # openai-compatible with json_schema = "auto" takes a 400 for a server without structured
    # output, and asks once more without it (docs/providers.md): then it is said
    assert setup.calls() == (2 if setup.provider == "openai-compatible" else 1)


# -- transient answers: retried within the cap, waiting what retry-after says --------------------------
@pytest.mark.parametrize("status", [408, 429, 500, 503, 529])
def test_a_transient_answer_is_retried_and_the_next_answer_used(setup, status):
    setup.fake.script.agent(api_error(status, "scripted", headers=SOON), PLAN)
    assert setup.build().plan(TICKET, "") == "Write hello.py"
    assert setup.calls() == 2


@pytest.mark.parametrize("status", [429, 500, 503, 529])
def test_a_transient_answer_that_persists_stops_at_the_retry_cap_with_one_error(setup, status):
    setup.fake.script.agent(*[api_error(status, "scripted overload", headers=SOON)] * (RETRIES + 2))
    with pytest.raises(AgentReplyError, match=rf"answered {status} after {RETRIES} retries .*`middle resume`") \
            as raised:
        setup.build().plan(TICKET, "")
    assert NAMES[setup.provider] in str(raised.value) and not isinstance(raised.value, ModelAccessError)
    assert setup.calls() == RETRIES + 1  # then given up: no endless loop


def test_a_retry_after_longer_than_a_minute_is_not_slept_through_but_said(setup):
    """A rate limit saying "come back in an hour": not retried (the anthropic SDK alone would
    sleep the hour, silently, before each retry); the line says how long to wait."""
    setup.fake.script.agent(*[api_error(429, "rate limited", headers={"retry-after": "3600"})] * 3)
    with pytest.raises(AgentReplyError, match=r"answered 429 \(rate limited\) and asks to wait 3600 s: try again "
                                              r"after that with `middle resume`"):
        setup.build().plan(TICKET, "")
    assert setup.calls() == 1


# -- no answer, or one that cannot be read --------------------------------------------------------------
def test_a_reply_held_past_the_timeout_is_retried_then_one_error_naming_the_timeout(setup):
    def slow(_body):
        time.sleep(1.0)
        return PLAN
    setup.fake.script.agent(slow, slow)
    with pytest.raises(AgentReplyError, match=r"did not answer within 0.3 s .*\[agent\] timeout_s"):
        setup.build(retries=1, timeout_s=0.3).plan(TICKET, "")
    assert setup.calls() == 2  # the timed-out call retried once (the cap), then given up


def test_a_timeout_then_an_answer_is_used(setup):
    def slow(_body):
        time.sleep(1.0)
        return PLAN
    setup.fake.script.agent(slow, PLAN)
    assert setup.build(retries=1, timeout_s=0.3).plan(TICKET, "") == "Write hello.py"


def test_a_server_gone_mid_run_is_one_error_saying_it_cannot_be_reached(setup):
    setup.fake.script.agent(PLAN)
    agent = setup.build(retries=1)
    assert agent.plan(TICKET, "") == "Write hello.py"
    setup.fake.stop()  # nothing listens there any more: connection refused
    with pytest.raises(ModelAccessError, match=r"cannot reach .*: check"):
        agent.assess(TICKET, "Claude Code responded: done", "", 1)


@pytest.mark.parametrize("broken", [
    broken_reply("<html><body>502 Bad Gateway</body></html>"),  # a proxy's page, with a 200
    broken_reply('{"id": "msg_01", "content": [{"type": "te'),  # JSON cut short
    broken_reply('{"id": "msg_01", "content": [', cut=True),  # the connection closed mid-reply
], ids=["not-json", "truncated-json", "connection-cut"])
def test_a_reply_that_cannot_be_read_is_one_error_naming_the_provider(setup, broken):
    setup.fake.script.agent(*[broken] * (RETRIES + 2))
    with pytest.raises(AgentReplyError, match=r"(could not be read|cut off).*`middle resume`") as raised:
        setup.build(retries=1).plan(TICKET, "")
    assert NAMES[setup.provider] in str(raised.value)
    assert setup.calls() <= 2  # at most the cap


def test_each_test_the_table_of_the_providers_page_names_exists():
    """docs/providers.md's "When the model call fails" names its tests (F:: here, C:: the CLI
    providers' file): a renamed test must be renamed there too."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "providers.md").read_text()
    here = Path(__file__)
    files = {"F": here.read_text(), "C": (here.parent / "test_provider_failures_cli.py").read_text()}
    named = re.findall(r"\b([FC])::(test_\w+)", page)
    assert len(named) >= 12
    for prefix, name in named:
        assert f"def {name}(" in files[prefix], f"docs/providers.md names {prefix}::{name}, which does not exist"
