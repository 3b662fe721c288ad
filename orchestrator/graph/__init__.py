"""The ticket workflow as a LangGraph state machine (state, context, nodes, builder)."""

from orchestrator.graph.builder import build_graph, mermaid
from orchestrator.graph.context import Limits, TicketContext
from orchestrator.graph.state import TicketState

__all__ = ["build_graph", "mermaid", "Limits", "TicketContext", "TicketState"]
