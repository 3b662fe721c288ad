"""The middle agent: plans the first prompt and assesses each Claude Code turn, as JSON decisions."""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from pydantic import BaseModel

from orchestrator.agent import prompts
from orchestrator.agent.decision import Decision, Plan, parse_reply
from orchestrator.agent.llm import AgentLLM, as_agent_llm
from orchestrator.errors import AgentReplyError

log = logging.getLogger("middle.agent")

M = TypeVar("M", bound=BaseModel)

REPAIR = (
    "Your reply could not be used: {error}. Reply again with only one JSON object matching "
    "the schema {schema}, and nothing else."
)


class MiddleAgent:
    """Turns the ticket, the conversation and recalled memories into prompts and decisions."""

    def __init__(self, llm: Any, max_turns: int = 20):
        self.llm: AgentLLM = as_agent_llm(llm)
        self.max_turns = max_turns

    def plan(self, ticket: dict[str, Any], memories: str) -> str:
        return self._ask(prompts.plan_message(ticket, memories), Plan).prompt

    def revise(self, ticket: dict[str, Any], history: str, feedback: list[str], memories: str,
               conflict: str | None = None) -> str:
        """A review round's first prompt for Claude Code, from the human's feedback."""
        return self._ask(prompts.revise_message(ticket, history, feedback, memories, conflict), Plan).prompt

    def correct(self, ticket: dict[str, Any], failure: str, memories: str) -> str:
        """The next prompt for Claude Code after the project's check failed on its work."""
        return self._ask(prompts.correct_message(ticket, failure, memories), Plan).prompt

    def assess(
        self, ticket: dict[str, Any], conversation: str, memories: str, turn: int
    ) -> Decision:
        message = prompts.assess_message(ticket, conversation, memories, turn, self.max_turns)
        return self._ask(message, Decision)

    def _ask(self, user_message: str, model: type[M]) -> M:
        messages = [{"role": "user", "content": user_message}]
        reply = self.llm.complete(prompts.SYSTEM_PROMPT, messages, model)
        try:
            return parse_reply(reply, model)
        except ValueError as first:
            log.warning("middle agent reply unusable (%s); asking once to repair it", first)
            schema = ", ".join(model.model_fields)
            messages += [
                {"role": "assistant", "content": reply or "(empty reply)"},
                {"role": "user", "content": REPAIR.format(error=first, schema="{" + schema + "}")},
            ]
            repaired = self.llm.complete(prompts.SYSTEM_PROMPT, messages, model)
            try:
                return parse_reply(repaired, model)
            except ValueError as second:
                snippet = (repaired or "").strip().replace("\n", " ")[:200]
                raise AgentReplyError(
                    f"the middle agent's reply was unusable twice ({second}); last reply began: "
                    f"{snippet!r}. Check [agent] model, then `middle resume` the ticket"
                ) from None
