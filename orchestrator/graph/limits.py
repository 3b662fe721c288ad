"""The run's spending limits ([agent] max_cost_usd and max_turns): past either no further turn
starts, neither the middle agent's next one nor a correction of a failed check."""

from __future__ import annotations

from orchestrator.graph.context import TicketContext
from orchestrator.graph.state import TicketState

__all__ = ["spend_limit_reason"]


def spend_limit_reason(state: TicketState, ctx: TicketContext) -> str | None:
    """The cost or turn limit the run has reached (no further turn may start), or None."""
    if state.get("cost_usd", 0.0) >= ctx.limits.max_cost_usd:
        return (f"cost limit reached: ${state['cost_usd']:.4f} spent of max_cost_usd "
                f"${ctx.limits.max_cost_usd:g} (raise [agent] max_cost_usd to allow more; a CLI that reports "
                "no cost for its model is counted by its tokens: `middle doctor` says at what price, which "
                "[coding_agent.options] price sets)")
    if state.get("turn", 0) >= ctx.limits.max_turns:
        return (f"turn limit reached: {state['turn']} turns of max_turns {ctx.limits.max_turns} "
                "without completing (raise [agent] max_turns or split the ticket)")
    return None
