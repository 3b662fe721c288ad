"""Builds the ticket graph, uncompiled, so callers compile it with their own checkpointer."""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from orchestrator.graph import checking, nodes
from orchestrator.graph.context import TicketContext
from orchestrator.graph.state import TicketState


def build_graph() -> StateGraph[TicketState, TicketContext, TicketState, TicketState]:
    """START → load_ticket → prepare → recall_start → plan → work → recall_turn → assess → ...

    assess goes to check when complete (its pass to commit → index_summary → finalize, its
    failure to correct → work), to fail over a limit, else back to work.
    """
    g = StateGraph(TicketState, context_schema=TicketContext)
    for fn in (nodes.load_ticket, checking.prepare, nodes.recall_start, nodes.plan, nodes.work, nodes.recall_turn,
               nodes.assess, checking.check, checking.correct, nodes.commit, nodes.index_summary, nodes.finalize,
               nodes.fail):
        g.add_node(fn.__name__, fn)
    g.add_edge(START, "load_ticket")
    g.add_edge("load_ticket", "prepare")
    g.add_edge("prepare", "recall_start")
    g.add_edge("recall_start", "plan")
    g.add_edge("plan", "work")
    g.add_edge("work", "recall_turn")
    g.add_edge("recall_turn", "assess")
    g.add_conditional_edges("assess", nodes.route_after_assess, ["check", "fail", "work"])
    g.add_conditional_edges("check", checking.route_after_check, ["commit", "correct", "fail"])
    g.add_edge("correct", "work")
    g.add_edge("commit", "index_summary")
    g.add_edge("index_summary", "finalize")
    g.add_edge("finalize", END)
    g.add_edge("fail", END)
    return g


def mermaid() -> str:
    """The graph as a Mermaid diagram (`middle graph`)."""
    return build_graph().compile().get_graph().draw_mermaid()
