"""The middle agent: prompts, the decision schema, and the LLM adapters that produce decisions."""

from orchestrator.agent.decision import Decision, Plan
from orchestrator.agent.middle_agent import MiddleAgent

__all__ = ["Decision", "Plan", "MiddleAgent"]
