"""Claude Code follows `[agent] provider` bedrock / vertex (orchestrator/coding_agent/claude_code_cloud.py)."""

from __future__ import annotations

from orchestrator.coding_agent.claude_code_cloud import provider_env
from orchestrator.config.settings import AgentConfig


def test_bedrock_and_vertex_settings_become_claude_codes_own_switches():
    bedrock = AgentConfig(provider="bedrock", region="eu-west-1", aws_profile="work", base_url="https://vpce.example")
    assert provider_env(bedrock, {}) == {"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "eu-west-1",
                                         "AWS_PROFILE": "work", "ANTHROPIC_BEDROCK_BASE_URL": "https://vpce.example"}
    vertex = AgentConfig(provider="vertex", region="us-east5", project_id="team")
    assert provider_env(vertex, {}) == {"CLAUDE_CODE_USE_VERTEX": "1", "CLOUD_ML_REGION": "us-east5",
                                        "ANTHROPIC_VERTEX_PROJECT_ID": "team"}
    assert provider_env(AgentConfig(provider="bedrock"), {}) == {"CLAUDE_CODE_USE_BEDROCK": "1"}


def test_other_providers_and_an_environment_that_already_chose_are_left_alone():
    assert provider_env(AgentConfig(), {}) == {}
    assert provider_env(AgentConfig(provider="claude-code"), {}) == {}
    assert provider_env(AgentConfig(provider="bedrock"), {"CLAUDE_CODE_USE_VERTEX": "1"}) == {}
