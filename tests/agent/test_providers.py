"""`[agent] provider`: each way to the model, through its real client, on a local fake of its API."""

from __future__ import annotations

import json
import sys

import pytest

from orchestrator.agent.decision import Decision
from orchestrator.agent.middle_agent import MiddleAgent
from orchestrator.agent.providers import build_agent_llm
from orchestrator.config.settings import AgentConfig, Config, load_config
from orchestrator.errors import ConfigError, ModelAccessError
from orchestrator.fake_api import claude_code_env
from orchestrator.fake_api.cloud import FAKE_GOOGLE_TOKEN, bedrock_env, google_service_account_file, vertex_env
from orchestrator.fake_api.openai_chat import FakeChatCompletionsAPI

TICKET = {"id": "t1", "project_id": "p", "title": "Add hello", "description": "Make hello.py",
          "project_path": "/tmp/p"}
PLAN = json.dumps({"prompt": "Write hello.py"})


@pytest.fixture
def aws(monkeypatch):
    """Static AWS credentials as the AWS CLI reads them; no instance-metadata lookups."""
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_DEFAULT_REGION",
                "ANTHROPIC_BEDROCK_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    for key, value in bedrock_env().items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def gcp(monkeypatch, tmp_path, fake_api):
    """Google Application Default Credentials: a service-account key whose token endpoint is the fake."""
    for var in ("ANTHROPIC_VERTEX_PROJECT_ID", "ANTHROPIC_VERTEX_BASE_URL", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    key = google_service_account_file(tmp_path / "sa.json", f"{fake_api.base_url}/token", "adc-project")
    for name, value in vertex_env(key).items():
        monkeypatch.setenv(name, value)
    return key


def agent_for(**agent) -> MiddleAgent:
    return MiddleAgent(build_agent_llm(AgentConfig(**agent), max_retries=0))


# -- bedrock ---------------------------------------------------------------------------------------
def test_bedrock_signs_with_the_environments_aws_credentials_and_calls_the_invoke_route(fake_api, aws):
    fake_api.script.agent(PLAN)
    agent = agent_for(provider="bedrock", model="us.anthropic.claude-sonnet-5-5", base_url=fake_api.base_url)
    assert agent.plan(TICKET, "") == "Write hello.py"
    [req] = fake_api.requests
    assert req.path == "/model/us.anthropic.claude-sonnet-5-5/invoke" and req.channel == "agent"
    auth = req.headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDFAKELOCAL/") and "/us-west-2/bedrock/" in auth
    # the body as Bedrock takes it: the model in the path, not the body; the structured output kept
    assert req.cloud == "bedrock" and "model" not in req.body and "anthropic_version" in req.body
    assert req.body["output_config"]["format"]["type"] == "json_schema"
    assert agent.llm.where() == f"{fake_api.base_url} (us-west-2, AWS credentials: env)"  # middle doctor's


def test_bedrock_with_a_rejected_key_is_a_model_access_error_naming_bedrock(fake_api, aws):
    fake_api.rejected_credentials.add("AKIDFAKELOCAL")
    agent = agent_for(provider="bedrock", base_url=fake_api.base_url)
    with pytest.raises(ModelAccessError, match=r"^Amazon Bedrock rejected the AWS credentials \(403\): set "
                                               r"AWS_ACCESS_KEY_ID"):
        agent.plan(TICKET, "")


def test_bedrock_without_credentials_or_region_says_what_to_set(monkeypatch, aws):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ModelAccessError, match="Amazon Bedrock: no AWS credentials found: set AWS_ACCESS_KEY_ID"):
        build_agent_llm(AgentConfig(provider="bedrock"))
    monkeypatch.delenv("AWS_REGION")
    with pytest.raises(ModelAccessError, match=r"Amazon Bedrock needs a region: set \[agent\] region"):
        build_agent_llm(AgentConfig(provider="bedrock"))


# -- vertex ----------------------------------------------------------------------------------------
def test_vertex_gets_a_token_from_the_adc_and_calls_raw_predict_in_the_adc_project(fake_api, gcp):
    fake_api.script.agent(PLAN)
    agent = agent_for(provider="vertex", model="claude-sonnet-5-5", base_url=f"{fake_api.base_url}/v1")
    assert agent.plan(TICKET, "") == "Write hello.py"
    token, call = fake_api.requests
    assert token.path == "/token" and "grant_type" in str(token.body)  # a signed JWT exchanged
    assert call.path == ("/v1/projects/adc-project/locations/us-east5/publishers/anthropic/models/"
                         "claude-sonnet-5-5:rawPredict")
    assert call.headers["authorization"] == f"Bearer {FAKE_GOOGLE_TOKEN}" and call.channel == "agent"
    assert call.cloud == "vertex" and "model" not in call.body and "anthropic_version" in call.body
    assert "(project adc-project, us-east5, service_account credentials)" in agent.llm.where()


def test_vertex_project_and_region_options_win_over_the_environment(fake_api, gcp):
    fake_api.script.agent(PLAN)
    agent = agent_for(provider="vertex", project_id="my-proj", region="europe-west1",
                      base_url=f"{fake_api.base_url}/v1")
    agent.plan(TICKET, "")
    assert "/projects/my-proj/locations/europe-west1/" in fake_api.requests[-1].path


def test_vertex_with_a_rejected_token_or_no_credentials_names_vertex(fake_api, gcp, monkeypatch, tmp_path):
    fake_api.rejected_credentials.add(FAKE_GOOGLE_TOKEN)
    agent = agent_for(provider="vertex", base_url=f"{fake_api.base_url}/v1")
    with pytest.raises(ModelAccessError, match=r"^Google Vertex AI rejected the Google credentials \(401\): "
                                               r"run `gcloud auth application-default login`"):
        agent.plan(TICKET, "")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(ModelAccessError, match="Google Vertex AI: no credentials .*missing.json"):
        build_agent_llm(AgentConfig(provider="vertex"))


# -- openai-compatible -----------------------------------------------------------------------------
def test_openai_compatible_asks_for_the_json_schema_and_uses_the_reply():
    with FakeChatCompletionsAPI() as server:
        server.script.agent(json.dumps({"complete": True, "summary": "Done."}))
        agent = agent_for(provider="openai-compatible", model="gpt-5-mini", base_url=server.base_url)
        decision = agent.assess(TICKET, "Claude Code responded: done", "", 1)
        [req] = server.requests
    assert decision.complete and decision.summary == "Done."
    fmt = req.body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == Decision.model_json_schema()
    assert req.body["model"] == "gpt-5-mini" and req.body["messages"][0]["role"] == "system"
    assert req.headers["authorization"] == "Bearer no-key"  # a local server needs no key
    assert agent.llm.where().endswith("/v1 (no key)")


def test_openai_compatible_falls_back_to_a_checked_parse_and_retries_a_reply_that_is_not_json():
    with FakeChatCompletionsAPI(supports_json_schema=False) as server:
        server.script.agent("Sure! I will write hello.py.", PLAN)
        agent = agent_for(provider="openai-compatible", model="llama3.1", base_url=server.base_url)
        assert agent.plan(TICKET, "") == "Write hello.py"
        refused, first, retry = server.requests
    assert refused.reply["status"] == 400 and "response_format" in refused.body
    assert "response_format" not in first.body and "response_format" not in retry.body
    said = retry.body["messages"]
    assert said[-2] == {"role": "assistant", "content": "Sure! I will write hello.py."}
    assert "not valid JSON" in said[-1]["content"] and '"prompt"' in said[-1]["content"]


def test_openai_compatible_retries_are_bounded():
    with FakeChatCompletionsAPI() as server:
        server.script.agent(*["no json here"] * 6)
        agent = agent_for(provider="openai-compatible", model="m", base_url=server.base_url, parse_retries=1)
        with pytest.raises(Exception, match="unusable twice"):
            agent.plan(TICKET, "")
        # 2 calls (a reply, one retry) for the first answer, 2 for the middle agent's one repair
        assert len(server.requests) == 4


def test_openai_compatible_sends_the_named_key_and_a_rejected_one_names_the_variable(monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-wrong")
    with FakeChatCompletionsAPI() as server:
        server.rejected_credentials.add("sk-or-wrong")
        agent = agent_for(provider="openai-compatible", model="m", base_url=server.base_url,
                          api_key_env="OPENROUTER_API_KEY")
        with pytest.raises(ModelAccessError, match=r"provider openai-compatible: the server at .* rejected the "
                                                   r"API key \(401\): set OPENROUTER_API_KEY"):
            agent.plan(TICKET, "")
        assert server.requests[0].headers["authorization"] == "Bearer sk-or-wrong"
    monkeypatch.delenv("OPENROUTER_API_KEY")
    with pytest.raises(ModelAccessError, match="OPENROUTER_API_KEY is not set"):
        build_agent_llm(AgentConfig(provider="openai-compatible", model="m", base_url="http://x/v1",
                                    api_key_env="OPENROUTER_API_KEY"))


def test_openai_compatible_unreachable_server_is_a_model_access_error():
    agent = agent_for(provider="openai-compatible", model="m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ModelAccessError, match="cannot reach provider openai-compatible"):
        agent.plan(TICKET, "")


# -- claude-code -----------------------------------------------------------------------------------
@pytest.mark.cli
def test_claude_code_asks_through_the_cli_with_no_tools_and_the_decisions_schema(
        fake_api, claude_cli, monkeypatch, tmp_path):
    for key, value in claude_code_env(fake_api.base_url, tmp_path / "cc", max_retries=0).items():
        monkeypatch.setenv(key, value)
    fake_api.script.agent(json.dumps({"complete": False, "next_prompt": "Add a test."}))
    agent = agent_for(provider="claude-code", cli_path=claude_cli)
    decision = agent.assess(TICKET, "Claude Code responded: wrote it", "", 1)
    assert not decision.complete and decision.next_prompt == "Add a test."
    [req] = fake_api.requests_for("agent")
    assert [t["name"] for t in req.body["tools"] if not t.get("defer_loading")] == ["StructuredOutput"]
    schema = req.body["tools"][-1]["input_schema"]
    assert schema["properties"].keys() == Decision.model_json_schema()["properties"].keys()
    assert "You are the middle agent" in json.dumps(req.body["system"])


@pytest.mark.cli
def test_claude_code_without_a_login_names_the_provider_and_the_sign_in(fake_api, claude_cli, monkeypatch, tmp_path):
    for key, value in claude_code_env(fake_api.base_url, tmp_path / "cc", api_key="", max_retries=0).items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ModelAccessError, match=r"^provider claude-code: Claude Code cannot use a model .*/login"):
        agent_for(provider="claude-code", cli_path=claude_cli).plan(TICKET, "")


def test_claude_code_missing_cli_is_a_model_access_error(tmp_path):
    with pytest.raises(ModelAccessError, match=r"provider claude-code: .*\[agent\] cli_path"):
        build_agent_llm(AgentConfig(provider="claude-code", cli_path=str(tmp_path / "no-claude")))


# -- the options -----------------------------------------------------------------------------------
@pytest.mark.parametrize("agent, needle", [
    ({"provider": "anthropic", "region": "us-east-1"}, "region is an option of provider bedrock / vertex"),
    ({"provider": "openai-compatible", "model": "m"}, "needs base_url"),
    ({"provider": "openai-compatible", "base_url": "http://x/v1"}, "needs model"),
    ({"provider": "bedrock", "cli_path": "x"}, "cli_path is an option of provider claude-code"),
    ({"provider": "openai-compatible", "model": "m", "base_url": "http://x", "api_key_env": "a b"},
     "not an environment variable name"),
    ({"provider": "azure"}, "Input should be 'anthropic'"),
])
def test_bad_provider_options_are_refused(tmp_path, agent, needle):
    (tmp_path / "middle.toml").write_text("[agent]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in agent.items()))
    with pytest.raises(ConfigError, match=needle):
        load_config(tmp_path / "middle.toml", environ={})


def test_a_missing_sdk_is_one_line_with_the_pip_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"needs the boto3 package: pip install 'middle-agent\[bedrock\]'"):
        build_agent_llm(AgentConfig(provider="bedrock"))
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigError, match=r"pip install 'middle-agent\[openai\]'"):
        build_agent_llm(AgentConfig(provider="openai-compatible", model="m", base_url="http://x/v1"))


def test_each_config_block_of_the_providers_page_is_valid(tmp_path):
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "providers.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", page, re.S)
    providers = []
    for block in blocks:
        (tmp_path / "middle.toml").write_text(block)
        providers.append(load_config(tmp_path / "middle.toml", environ={}).agent.provider)
    assert providers == ["anthropic", "bedrock", "vertex", "openai-compatible", "claude-code", "codex"]


def test_the_memory_tier_uses_the_providers_own_way_to_the_model(tmp_path):
    from orchestrator.services import Services

    with FakeChatCompletionsAPI() as server:
        server.script.aux("A short summary.")
        agent = {"provider": "openai-compatible", "model": "big", "base_url": server.base_url}
        cfg = Config(root=tmp_path, agent=agent, memory={"llm_model": "small"})
        with Services(cfg) as svc:
            assert svc.memory_llm is not None
            assert svc.memory_llm.complete("Summarize.", "a long text") == "A short summary."
        [req] = server.requests
    assert req.body["model"] == "small" and "response_format" not in req.body


def test_vertex_whose_token_endpoint_refuses_the_key_names_vertex(fake_api, gcp):
    fake_api.rejected_credentials.add("grant_type")  # any token request: a revoked service-account key
    agent = agent_for(provider="vertex", base_url=f"{fake_api.base_url}/v1")
    with pytest.raises(ModelAccessError, match=r"^Google Vertex AI: Google credentials could not be used "
                                               r"\(.*invalid_grant.*\): run `gcloud auth"):
        agent.plan(TICKET, "")
    assert [r.path for r in fake_api.requests] == ["/token"]  # no model call without a token


def test_openai_compatible_switches_to_max_completion_tokens_when_the_model_wants_it():
    with FakeChatCompletionsAPI(max_completion_tokens_only=True) as server:
        server.script.agent(PLAN, PLAN)
        agent = agent_for(provider="openai-compatible", model="o5", base_url=server.base_url, max_tokens=900)
        assert agent.plan(TICKET, "") == "Write hello.py"
        assert agent.plan(TICKET, "") == "Write hello.py"  # learnt once, for good
        refused, *answered = server.requests
    assert refused.reply["status"] == 400 and refused.body["max_tokens"] == 900
    assert [r.body.get("max_completion_tokens") for r in answered] == [900, 900]
    assert all("response_format" in r.body for r in answered)  # the schema kept


def test_bedrock_with_a_bedrock_api_key_sends_it_as_a_bearer_token(fake_api, aws, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-fake")
    fake_api.script.agent(PLAN)
    agent_for(provider="bedrock", base_url=fake_api.base_url).plan(TICKET, "")
    [req] = fake_api.requests
    assert req.headers["authorization"] == "Bearer bedrock-api-key-fake" and req.cloud == "bedrock"


def test_an_api_without_structured_output_is_asked_again_without_it_for_the_rest_of_the_run(fake_api, aws):
    fake_api.supports_structured_output = False  # e.g. a Bedrock region that lacks it
    fake_api.script.agent("Here it is: " + PLAN, PLAN)
    agent = agent_for(provider="bedrock", base_url=fake_api.base_url)
    assert agent.plan(TICKET, "") == "Write hello.py"  # the JSON read out of the prose
    assert agent.plan(TICKET, "") == "Write hello.py"
    refused, *answered = fake_api.requests
    assert refused.reply["status"] == 400 and "output_config" in refused.body
    assert len(answered) == 2 and all("output_config" not in r.body for r in answered)
