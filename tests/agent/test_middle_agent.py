"""The middle agent over the anthropic SDK (against the fake) and over a LangChain chat model."""

from __future__ import annotations

import json

import pytest

from orchestrator.agent import MiddleAgent
from orchestrator.agent.decision import Decision, Plan, parse_reply
from orchestrator.agent.llm import AnthropicLLM, as_agent_llm
from orchestrator.agent.prompts import SYSTEM_PROMPT
from orchestrator.errors import AgentReplyError, ConfigError, ModelAccessError
from orchestrator.fake_api import MIDDLE_AGENT_MARKER, api_error

TICKET = {"id": "t1", "project_id": "p", "title": "Add hello", "description": "Make hello.py",
          "project_path": "/tmp/p"}


def llm_for(fake_api, **kw) -> AnthropicLLM:
    return AnthropicLLM("claude-sonnet-5-5", 512, base_url=fake_api.base_url, api_key="sk-x",
                        max_retries=0, **kw)


def test_system_prompt_is_routed_as_the_agent():
    assert SYSTEM_PROMPT.startswith(MIDDLE_AGENT_MARKER)


def test_plan_and_assess_over_the_sdk_with_structured_output(fake_api):
    fake_api.script.agent(json.dumps({"prompt": "Write hello.py"}),
                          json.dumps({"complete": True, "summary": "done", "next_prompt": ""}))
    agent = MiddleAgent(llm_for(fake_api))
    assert agent.plan(TICKET, "Memories invoked:\nold") == "Write hello.py"
    decision = agent.assess(TICKET, "--- Turn 1 ---", "", 1)
    assert decision == Decision(complete=True, summary="done", next_prompt="")
    first, second = fake_api.requests_for("agent")
    assert first.body["model"] == "claude-sonnet-5-5" and first.body["max_tokens"] == 512
    assert first.body["system"] == SYSTEM_PROMPT
    assert first.body["messages"][0]["content"].startswith("Memories invoked:\nold\n\nTicket: Add hello")
    schema = first.body["output_config"]["format"]
    assert schema["type"] == "json_schema" and set(schema["schema"]["properties"]) == {"prompt"}
    assert set(second.body["output_config"]["format"]["schema"]["properties"]) == {
        "complete", "summary", "next_prompt", "decisions", "rejected", "instructions", "memories_used"}


def test_one_repair_then_a_clear_failure(fake_api):
    fake_api.script.agent("I am not JSON", '{"complete": "maybe"}')
    agent = MiddleAgent(llm_for(fake_api))
    with pytest.raises(AgentReplyError, match="unusable twice"):
        agent.assess(TICKET, "t", "", 1)
    repair = fake_api.requests_for("agent")[1].body["messages"]
    assert [m["role"] for m in repair] == ["user", "assistant", "user"]
    assert repair[1]["content"] == "I am not JSON" and "could not be used" in repair[2]["content"]


def test_api_errors_become_clear_errors(fake_api):
    fake_api.script.agent(api_error(529, "overloaded"))
    with pytest.raises(AgentReplyError, match="529.*middle resume"):
        MiddleAgent(llm_for(fake_api)).plan(TICKET, "")
    fake_api.script.agent(api_error(401, "bad key"))
    with pytest.raises(ModelAccessError, match="ANTHROPIC_API_KEY"):
        MiddleAgent(llm_for(fake_api)).plan(TICKET, "")


def test_missing_api_key_says_what_to_do(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set.*--fake"):
        AnthropicLLM("m")


def test_base_url_comes_from_the_environment(fake_api, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_api.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    fake_api.script.agent(json.dumps({"prompt": "p"}))
    assert MiddleAgent(AnthropicLLM("m")).plan(TICKET, "") == "p"
    headers = fake_api.requests_for("agent")[0].headers
    assert "sk-env" in (headers.get("x-api-key", "") + headers.get("authorization", ""))


def test_a_langchain_chat_model_can_be_the_middle_agent():
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    model = FakeMessagesListChatModel(responses=[
        AIMessage(content='Here you go: ```json\n{"prompt": "Write hello.py"}\n```'),
        AIMessage(content='{"complete": false, "next_prompt": "Add a test"}'),
    ])
    agent = MiddleAgent(model)
    assert agent.plan(TICKET, "") == "Write hello.py"
    assert agent.assess(TICKET, "t", "", 1).next_prompt == "Add a test"


def test_not_a_model_is_refused():
    with pytest.raises(ConfigError, match="not a usable model"):
        as_agent_llm(object())


@pytest.mark.parametrize("reply,expected", [
    ('{"prompt": "x"}', "x"),
    ('```json\n{"prompt": "y"}\n```', "y"),
    ('Sure. {"prompt": "z"} Thanks.', "z"),
])
def test_parse_reply_accepts_json_in_common_wrappings(reply, expected):
    assert parse_reply(reply, Plan).prompt == expected


@pytest.mark.parametrize("reply,reason", [
    ("no json here", "no JSON object|not valid JSON"),
    ("[1, 2]", "not an object|no JSON"),
    ('{"prompt": ""}', "prompt"),
])
def test_parse_reply_explains_what_is_wrong(reply, reason):
    with pytest.raises(ValueError, match=reason):
        parse_reply(reply, Plan)
