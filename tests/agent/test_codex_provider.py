"""`[agent] provider = "codex"`: the middle agent's calls through the real Codex CLI, on the fake
Responses API (orchestrator/agent/codex_llm.py)."""

from __future__ import annotations

import json

import pytest

from orchestrator.agent.codex_llm import CodexLLM
from orchestrator.agent.decision import Decision
from orchestrator.agent.middle_agent import MiddleAgent
from orchestrator.agent.providers import build_agent_llm
from orchestrator.config.settings import AgentConfig
from orchestrator.errors import ModelAccessError
from orchestrator.fake_api.openai_responses import FakeResponsesAPI
from orchestrator.testing.clis import require_cli

TICKET = {"id": "t1", "project_id": "p", "project_path": "/tmp/p", "title": "Add a notes file",
          "description": "Create notes.txt saying hello."}
KEY_VAR = "CODEX_PROVIDER_TEST_KEY"


@pytest.fixture
def codex(monkeypatch, tmp_path):
    """The real CLI with a private home (nothing of the machine's ~/.codex) and the fake's key."""
    path = require_cli("codex", "npm install -g @openai/codex@0.171.0")
    for name, value in {"CODEX_HOME": tmp_path / "codex-home", "HOME": tmp_path / "home"}.items():
        value.mkdir()
        monkeypatch.setenv(name, str(value))
    # No retries of a failed request on the provider agent_on names (merged with the command's -c
    # settings): Codex's backoff on the rejected key's 401 waited 6 s for the same error.
    (tmp_path / "codex-home" / "config.toml").write_text(
        "[model_providers.middle]\nrequest_max_retries = 0\nstream_max_retries = 0\n")
    monkeypatch.setenv(KEY_VAR, "sk-fake-local")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return path


def agent_on(fake: FakeResponsesAPI, cli: str, **more) -> MiddleAgent:
    cfg = AgentConfig(provider="codex", model="gpt-5.5", cli_path=cli, base_url=fake.base_url,
                      api_key_env=KEY_VAR, **more)
    return MiddleAgent(build_agent_llm(cfg))


def test_the_decision_comes_through_codex_with_the_middle_agents_instructions_and_schema(codex):
    with FakeResponsesAPI() as fake:
        fake.script.agent(json.dumps({"complete": False, "next_prompt": "Add a test."}))
        decision = agent_on(fake, codex).assess(TICKET, "Codex responded: wrote it", "", 1)
        assert not decision.complete and decision.next_prompt == "Add a test."
        [req] = fake.requests_for("agent")  # the middle agent's own channel, by its instructions
        assert "You are the middle agent" in json.dumps(req.canonical["system"])
        fmt = req.body["text"]["format"]
        assert fmt["type"] == "json_schema"
        assert fmt["schema"]["properties"].keys() == Decision.model_json_schema()["properties"].keys()
        assert req.headers["authorization"] == "Bearer sk-fake-local"


def test_a_rejected_key_names_the_provider_and_how_to_sign_in(codex):
    with FakeResponsesAPI() as fake:
        fake.rejected_credentials.add("sk-fake-local")
        with pytest.raises(ModelAccessError, match=r"^provider codex: Codex cannot use a model .*codex login"):
            agent_on(fake, codex).plan(TICKET, "")


def test_a_missing_cli_is_one_error_with_the_install_command(tmp_path):
    with pytest.raises(ModelAccessError, match="npm install -g @openai/codex@"):
        build_agent_llm(AgentConfig(provider="codex", cli_path=str(tmp_path / "no-codex")))


def test_options_of_other_providers_are_refused():
    with pytest.raises(ValueError, match="region is an option of provider"):
        AgentConfig(provider="codex", region="us-east-1")


@pytest.mark.parametrize("detail, refusal", [
    # A 503 from a server whose port reads 401... is an overload to retry, not a refusal (it was).
    ("unexpected status 503 Service Unavailable: scripted overload, url: http://127.0.0.1:40127/v1/responses",
     False),
    ("unexpected status 429 Too Many Requests, url: https://login.example.com/v1/responses", False),
    ("unexpected status 401 Unauthorized: invalid key, url: http://127.0.0.1:5000/v1/responses", True),
    ("Not logged in: run codex login", True),
])
def test_a_failure_is_read_by_its_status_and_words_never_by_its_url(tmp_path, detail, refusal):
    cli = tmp_path / "codex"
    cli.write_text("#!/bin/sh\n")
    cli.chmod(0o755)
    failure = CodexLLM("gpt-5.5", cli_path=str(cli))._failure(detail)
    assert isinstance(failure, ModelAccessError) is refusal, failure
    if not refusal:
        assert "try again later with `middle resume`" in str(failure)
