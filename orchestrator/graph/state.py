"""Graph state: plain JSON-able values only (ids, strings, numbers, lists of dicts)."""

from __future__ import annotations

from typing import Any, TypedDict


class TicketState(TypedDict, total=False):
    ticket_id: str
    run_id: str
    ticket: dict[str, Any]  # id, project_id, title, description, project_path, cwd, workspace
    turn: int  # Claude Code turns completed in this run
    last_prompt: str  # the prompt that produced the latest response (set by plan, then work)
    next_prompt: str  # what `work` sends next
    last_response: str
    session_id: str  # the Claude Code session this ticket's turns resume
    memories: str  # the latest "Memories invoked:" text ('' when none)
    transcript: list[dict[str, Any]]  # [{"turn", "prompt", "response"}]: this run's turns
    cost_usd: float  # Claude Code's reported cost, summed over this run's turns
    decision: dict[str, Any]  # the latest assess decision
    indexed_docs: list[str]
    wip: str  # the work-in-progress commit of the last turn (orchestrator.workspace.wip)
    commit: str | None  # the commit made on the ticket's branch at completion (None: no change)
    changes: list[dict[str, Any]]  # [{"path", "added", "deleted"}] of that commit
    status: str  # running | complete | failed
    reason: str
    # Review rounds (orchestrator.graph.rounds): 1 for a first run; a later round also has the
    # earlier rounds as text, the feedback that opened it and why its merge conflicted.
    round: int
    history: str
    round_feedback: list[str]
    conflict: str
    feedback_seen: int  # the id of the last feedback event the middle agent has read
    # The check loop (orchestrator.graph.checking): each check command's result on the base
    # commit, whether the last check passed, the check failures fed back so far, and what the
    # middle agent reads of the last one.
    check_base: dict[str, Any]
    check_passed: bool
    corrections: int
    check_failure: str
    check_failed_line: str  # the last failed check in one line ("`CMD` failed: exit 1"), for a failure's reason
    check_stopped: bool  # the last check failed past the cost or turn limit: no correction, the run fails


# What a finished node's state update contributes to its run event (the rest is in the turn
# record); the runner and the LangGraph Server entry record the same fields.
EVENT_FIELDS = ("memories", "turn", "cost_usd", "decision", "status", "reason", "indexed_docs",
                "commit", "changes", "corrections")
# Nodes that end the run: their `run_end` event (written with the run's end) is the run's last
# event, so no node-end event is recorded after it.
ENDING_NODES = ("finalize", "fail")
