"""kill -9 of `middle feedback ID "..."` just after it claimed the review round and stored the
feedback (one transaction), before the round's run started (orchestrator.killpoints:
round.claimed): a real `middle` process (the offline model, Claude Code on the fake Messages
API), real git and SQLite. Nothing is lost: the ticket shows the dead round to resume, feedback
given meanwhile is kept for it, and `middle resume` runs the round once with both."""

from __future__ import annotations

import pytest
from test_review_killed import TICKET, middle

from orchestrator.testing import make_repo
from orchestrator.workspace.git import out
from tickets.store import TicketStore

ASK = "Create `calc/other.py` with:\n```python\nY = 2\n```\n"


@pytest.fixture
def completed(tmp_path, claude_cli):
    make_repo(tmp_path / "repo", {"app.py": "print('v1')\n"})
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "t1.md").write_text(TICKET)
    (tmp_path / "middle.toml").write_text('state_dir = "state"\n[project]\npath = "repo"\n[memory]\nbackend = "none"\n')
    middle(tmp_path, "run", "--fake", "t1")
    return tmp_path


def test_a_feedback_killed_after_claiming_its_round_is_resumed_with_every_word(completed):
    root = completed
    middle(root, "feedback", "t1", ASK, "--fake", kill_at="round.claimed:1")
    row = next(line for line in middle(root, "tickets").stdout.splitlines() if " t1 " in line)
    assert "interrupted" in row and "middle resume t1" in row, row  # its claim's process is gone
    stored = " ".join(middle(root, "feedback", "t1", "and keep it short", "--fake").stdout.split())
    assert "feedback stored" in stored and "`middle resume t1 --fake`" in stored, stored
    assert "complete ticket t1" in middle(root, "resume", "t1", "--fake").stdout
    with TicketStore(root / "state" / "middle.sqlite3") as store:
        runs = store.list_runs("t1")
        assert len(runs) == 2 and store.round_of(runs[1]["id"]) == 2  # the killed round, continued
        texts = [e["text"] for e in store.feedback(runs[1]["id"])]
        assert texts == [ASK.strip(), "and keep it short"]  # each once
        assert store.get_ticket("t1").status.value == "complete" and store.get_claim("t1") is None
    assert out(root / "repo", "show", "middle/t1:calc/other.py") == "Y = 2"  # the round's work
