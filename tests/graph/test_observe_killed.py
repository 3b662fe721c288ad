"""kill -9 around the give of a turn's round to a conversation-watching memory backend
(`observe_round`; the built-in sliding_window), then a takeover on another machine: each round of
the ticket's conversation is in the backend once, none lost, none twice.

Machine A (a real process, the team's PostgreSQL store) runs the two-turn ticket of
test_killpoints with `[memory] backend = "sliding_window"` and dies at a point; machine B takes
the run over. The backend's conversation for the run is read back through memory itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_killpoints import machine_a_dies_at, take_over_and_check

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _memory(tmp_path: Path) -> dict[str, object]:
    # One memory folder for both machines (and, on PostgreSQL, the backend's tables are the store's).
    return {"save_dir": str(tmp_path / "memory"), "backend": "sliding_window",
            "options": {"background": False, "summarize_after_seq": 100}}  # no summary: every message in view


def _rounds(conversation: list[dict[str, str]]) -> list[str]:
    return [m["text"] for m in conversation if m["role"] == "response"]


# turn.finished:1: turn 1 stored done, its round not given yet (before: B found the turn done and
# never gave it: the conversation lacked turn 1). memory.observed:1: given, not recorded (B gives
# it again; the backend takes a round equal to its last as given). turn.assessed:1: given and
# recorded (B gives nothing again).
@pytest.mark.parametrize("at", ["turn.finished:1", "memory.observed:1",
                                pytest.param("turn.assessed:1", marks=pytest.mark.killsweep)])
def test_a_round_a_kill_cut_off_is_observed_once_on_takeover(at, tmp_path, team, pg_url, monkeypatch):
    memory = _memory(tmp_path)
    assert machine_a_dies_at(tmp_path, team, pg_url, at, memory=memory), f"machine A never passed {at}"
    done = take_over_and_check(tmp_path, team, pg_url, monkeypatch, memory=memory)
    assert _rounds(done["conversation"]) == ["Wrote a.txt.", "Wrote b.txt."], done["conversation"]
