"""Graph state: plain JSON-able values only (ids, strings, numbers, lists of dicts)."""

from __future__ import annotations

from typing import Any, TypedDict


class TicketState(TypedDict, total=False):
    ticket_id: str
    run_id: str
    ticket: dict[str, Any]  # id, project_id, title, description, project_path
    turn: int  # Claude Code turns completed in this run
    last_prompt: str  # the prompt that produced the latest response (set by plan, then work)
    next_prompt: str  # what `work` sends next
    last_response: str
    session_id: str  # the Claude Code session this ticket's turns resume
    memories: str  # the latest "Memories invoked:" text ('' when none)
    rounds: list[dict[str, Any]]  # [{"turn", "prompt", "response"}], the full transcript
    cost_usd: float  # Claude Code's reported cost, summed over this run's turns
    decision: dict[str, Any]  # the latest assess decision
    indexed_docs: list[str]
    status: str  # running | complete | failed
    reason: str
