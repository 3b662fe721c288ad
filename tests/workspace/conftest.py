"""The review tests' repository, ticket store, worktrees, review and memory (`env`)."""

from __future__ import annotations

import pytest
from review_helpers import Memory

from orchestrator.testing import InMemoryBackend, make_repo
from orchestrator.workspace import Review, Worktrees
from tickets.store import TicketStore


@pytest.fixture
def env(tmp_path):
    repo = make_repo(tmp_path / "repo", {"app.py": "print('v1')\n", "README.md": "app\n"})
    store = TicketStore(tmp_path / "state" / "middle.sqlite3")
    wt = Worktrees(tmp_path / "state" / "worktrees")
    memory = Memory()
    yield repo, store, wt, Review(store, wt, memory), memory
    store.close()
    InMemoryBackend.reset()
