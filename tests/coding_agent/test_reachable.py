"""The base URL a user gave a coding agent is asked before its first turn (reachable.py): a
refused port, a name that does not resolve, are said once, and a server that listens passes."""

from __future__ import annotations

import socket

import pytest

from orchestrator.coding_agent.aider import AiderAgent, AiderOptions
from orchestrator.coding_agent.codex import CodexAgent, CodexOptions
from orchestrator.coding_agent.gemini import GeminiAgent, GeminiOptions
from orchestrator.coding_agent.opencode import OpenCodeAgent, OpenCodeOptions
from orchestrator.coding_agent.reachable import model_base_url, unreachable


@pytest.fixture
def listening():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed as the block ends: nothing listens there


def test_a_server_that_listens_is_reachable(listening):
    assert unreachable(f"http://127.0.0.1:{listening}/v1") is None
    assert unreachable(f"http://localhost:{listening}") is None  # (localhost from the hosts file)


def test_a_port_nothing_listens_on_is_refused():
    port = closed_port()
    assert unreachable(f"http://127.0.0.1:{port}/v1") == f"connection refused at 127.0.0.1 port {port}"


def test_a_name_that_does_not_resolve_and_a_url_without_a_host_are_said():
    assert unreachable("http://no-such-host.invalid:8000/v1") == "its host name no-such-host.invalid does not resolve"
    assert unreachable("http:///v1") == "it names no host"


def test_each_agent_names_the_base_url_the_user_gave_and_none_of_its_own():
    env = {"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:1/g", "OPENAI_API_BASE": "http://127.0.0.1:2/v1"}
    assert model_base_url(GeminiAgent, GeminiOptions(), env) == "http://127.0.0.1:1/g"
    assert model_base_url(GeminiAgent, GeminiOptions(), {}) is None
    assert model_base_url(AiderAgent, AiderOptions(model="openai/x"), env) == "http://127.0.0.1:2/v1"
    assert model_base_url(AiderAgent, AiderOptions(model="ollama/llama3"), {}) == "http://localhost:11434"
    assert model_base_url(AiderAgent, AiderOptions(model="sonnet"), {}) is None
    assert model_base_url(CodexAgent, CodexOptions(), {"OPENAI_BASE_URL": "http://127.0.0.1:3/v1"}) == \
        "http://127.0.0.1:3/v1"
    assert model_base_url(CodexAgent, CodexOptions(), {}) is None
    declared = '{"provider":{"local":{"options":{"baseURL":"http://127.0.0.1:4/v1"}}}}'
    assert model_base_url(OpenCodeAgent, OpenCodeOptions(model="local/qwen"),
                          {"OPENCODE_CONFIG_CONTENT": declared}) == "http://127.0.0.1:4/v1"
    assert model_base_url(OpenCodeAgent, OpenCodeOptions(model="anthropic/claude"), {"HOME": "/nonexistent"}) is None
