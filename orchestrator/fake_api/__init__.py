"""A local fake of the Anthropic Messages API: the offline demo model and the test double."""

from orchestrator.agent.prompts import MIDDLE_AGENT_MARKER

from .demo import DemoResponder
from .env import claude_code_env
from .messages import classify, working_directory
from .replies import ApiError, Reply, api_error, reply, text, tool_use
from .scripted import ScriptedResponder
from .server import FakeMessagesAPI, RecordedRequest, Responder

__all__ = [
    "MIDDLE_AGENT_MARKER",
    "ApiError",
    "DemoResponder",
    "FakeMessagesAPI",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedResponder",
    "api_error",
    "classify",
    "claude_code_env",
    "reply",
    "text",
    "tool_use",
    "working_directory",
]
