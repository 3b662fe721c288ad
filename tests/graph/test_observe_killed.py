"""kill -9 around the give of a turn's round to a conversation-watching memory backend
(`observe_round`; the built-in sliding_window and hindsight), then a takeover on another machine:
each round of the ticket's conversation is in the backend once, none lost, none twice.

Machine A (a real process, the team's PostgreSQL store) runs the two-turn ticket of
test_killpoints with `[memory] backend = "sliding_window"` (or "hindsight") and dies at a point;
machine B takes the run over. The backend's rounds for the run are read back through memory
itself: sliding_window's conversation, hindsight's retained windows (one a round here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_killpoints import machine_a_dies_at, take_over_and_check

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BACKENDS = {  # every built-in backend that implements observe_round
    # no summary: every message in view
    "sliding_window": {"background": False, "summarize_after_seq": 100},
    # a window retained each round, none repeated: each round is one doc, read back by list_docs
    "hindsight": {"embedder": "hashing", "retain_every_turns": 1, "retain_overlap_turns": 0,
                  "mental_models": {}},
}


def _memory(tmp_path: Path, backend: str) -> dict[str, object]:
    # One memory folder for both machines (and, on PostgreSQL, the backend's tables are the store's).
    return {"save_dir": str(tmp_path / "memory"), "backend": backend, "options": BACKENDS[backend]}


def _rounds(backend: str, done: dict[str, Any]) -> list[str]:
    if backend == "sliding_window":
        return [m["text"] for m in done["conversation"] if m["role"] == "response"]
    return [said for doc in done["indexed"] if "Claude Code answered:" in doc
            for said in ("Wrote a.txt.", "Wrote b.txt.") if said in doc]


# turn.finished:1: turn 1 stored done, its round not given yet (before: B found the turn done and
# never gave it: the conversation lacked turn 1). memory.observed:1: given, not recorded (B gives
# it again; the backend takes a round equal to its last as given). turn.assessed:1: given and
# recorded (B gives nothing again).
# hindsight: the point its repeat skip is for in the suite, the other two in the sweep.
@pytest.mark.parametrize(("at", "backend"), [
    ("turn.finished:1", "sliding_window"), ("memory.observed:1", "sliding_window"),
    pytest.param("turn.assessed:1", "sliding_window", marks=pytest.mark.killsweep),
    ("memory.observed:1", "hindsight"),
    pytest.param("turn.finished:1", "hindsight", marks=pytest.mark.killsweep),
    pytest.param("turn.assessed:1", "hindsight", marks=pytest.mark.killsweep)])
def test_a_round_a_kill_cut_off_is_observed_once_on_takeover(at, backend, tmp_path, team, pg_url, monkeypatch):
    memory = _memory(tmp_path, backend)
    assert machine_a_dies_at(tmp_path, team, pg_url, at, memory=memory), f"machine A never passed {at}"
    done = take_over_and_check(tmp_path, team, pg_url, monkeypatch, memory=memory)
    assert _rounds(backend, done) == ["Wrote a.txt.", "Wrote b.txt."], done
