"""How one ticket's run ended, as `Orchestrator.run_ticket` and a batch report it.

Apart from runner.py so that the batch (which runner.py starts) and the runner share it
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RunOutcome:
    ticket_id: str
    run_id: str
    # complete | failed | interrupted | skipped | stored (feedback kept for a run) | lost (another
    # runner took the run over: this one stopped and wrote nothing more of it)
    status: str
    reason: str = ""
    turns: int = 0
    cost_usd: float = 0.0
    resumable: bool = False
    commit: str | None = None  # the commit on the ticket's branch (complete, with changes)
    changes: int = 0  # files it changed
    offline: bool = False  # run on the built-in fake model: its cost is made up, never shown as spent
    corrections: int = 0  # check failures fed back to the middle agent before it passed (or gave up)
