"""The server runs at most [run] parallel tickets at once (the rest queue), and its review routes
merge, refuse a merge over the user's uncommitted file, and discard."""

from __future__ import annotations

import time

import pytest

from orchestrator.workspace.git import branch_commit

pytestmark = pytest.mark.cli


def wait_status(client, ticket_id: str, want: set[str], timeout: float = 180) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.get(f"/api/tickets/{ticket_id}").json()["status"]
        if status in want:
            return status
        time.sleep(0.2)
    raise AssertionError(f"ticket {ticket_id} stayed {status}")


def test_runs_beyond_parallel_queue_then_merge_refuse_and_discard(server, claude_cli, project):
    c = server.client
    first = c.post("/api/tickets/001-greeting/run")
    second = c.post("/api/tickets/002-farewell/run")  # [run] parallel = 1: it waits its turn
    assert first.status_code == 202 and first.json()["run_id"]
    assert second.status_code == 202 and second.json() == {
        "ticket_id": "002-farewell", "run_id": None, "status": "queued",
        "stream": "/api/tickets/002-farewell/stream", "page": "/tickets/002-farewell"}
    assert "002-farewell" in c.get("/api/health").json()["running"]
    assert wait_status(c, "001-greeting", {"complete", "failed"}) == "complete"
    assert wait_status(c, "002-farewell", {"complete", "failed"}) == "complete"

    repo = project.root / "repo"
    assert c.post("/api/tickets/001-greeting/merge").json()["status"] == "merged"
    (repo / "calc" / "farewell.py").write_text("# the user's own file, not committed\n")
    head = branch_commit(repo, "main")
    refused = c.post("/api/tickets/002-farewell/merge")
    assert refused.status_code == 409 and "uncommitted changes" in refused.json()["error"]
    assert "calc/farewell.py" in refused.json()["error"]
    assert branch_commit(repo, "main") == head
    assert (repo / "calc" / "farewell.py").read_text() == "# the user's own file, not committed\n"

    discarded = c.post("/api/tickets/002-farewell/discard")
    assert discarded.status_code == 200 and discarded.json()["status"] == "discarded"
    assert "removed its worktree and branch middle/002-farewell" in discarded.json()["message"]
    assert branch_commit(repo, "middle/002-farewell") is None
    page = c.get("/tickets/002-farewell", headers={"Accept": "text/html"}).text
    assert 'data-action="run"' in page and 'data-action="merge"' not in page


def test_review_routes_refuse_what_cannot_be_done(server):
    c = server.client
    server.state.sync_folder()
    r = c.post("/api/tickets/001-greeting/merge")
    assert r.status_code == 400 and "only a complete ticket can be merged" in r.json()["error"]
    r = c.get("/api/tickets/001-greeting/diff")
    assert r.status_code == 400 and "never run" in r.json()["error"]
    assert c.post("/api/tickets/nosuch/discard").status_code == 404
