"""Offline mode: the built-in fake Messages API serves both the middle agent and Claude Code."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from orchestrator.agent.llm import AnthropicLLM
from orchestrator.config import Config

FAKE_API_KEY = "sk-fake-local"


@contextmanager
def offline_model(config: Config, responder: Any = None) -> Iterator[dict[str, Any]]:
    """Start the fake on 127.0.0.1 and yield Orchestrator kwargs (llm, worker_env) that use it.

    The default responder is the deterministic demo model; tests pass a ScriptedResponder.
    """
    from orchestrator.fake_api import DemoResponder, FakeMessagesAPI
    from orchestrator.fake_api.env import claude_code_env

    with FakeMessagesAPI(responder or DemoResponder()) as api:
        claude_config = config.resolve(config.state_dir) / "claude-config"
        claude_config.mkdir(parents=True, exist_ok=True)
        env = claude_code_env(api.base_url, str(claude_config), api_key=FAKE_API_KEY)
        llm = AnthropicLLM(config.agent.model, config.agent.max_tokens,
                           base_url=api.base_url, api_key=FAKE_API_KEY, max_retries=0)
        yield {"llm": llm, "worker_env": env, "api": api}
