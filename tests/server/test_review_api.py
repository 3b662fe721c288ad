"""The server runs at most [run] parallel tickets at once (the rest queue), and its review routes
merge, refuse a merge over the user's uncommitted file, discard (refusing over untracked files
unless forced), and revert (a conflict is a 409 naming the worktree where it waits; `done`)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orchestrator.testing.git import commit_all
from orchestrator.workspace.git import branch_commit


def wait_status(client, ticket_id: str, want: set[str], timeout: float = 180) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.get(f"/api/tickets/{ticket_id}").json()["status"]
        if status in want:
            return status
        time.sleep(0.2)
    raise AssertionError(f"ticket {ticket_id} stayed {status}")


@pytest.mark.cli
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


@pytest.mark.cli
def test_review_routes_refuse_what_cannot_be_done(server):
    c = server.client
    server.state.sync_folder()
    r = c.post("/api/tickets/001-greeting/merge")
    assert r.status_code == 400 and "only a complete ticket can be merged" in r.json()["error"]
    r = c.get("/api/tickets/001-greeting/diff")
    assert r.status_code == 400 and "never run" in r.json()["error"]
    assert c.post("/api/tickets/nosuch/discard").status_code == 404


def _merged_then_built_on(server, project) -> Path:
    """001-greeting (a line added to calc/ops.py) merged, then later work on main rewrote that line."""
    from server_helpers import complete_by_hand

    c = server.client
    repo = project.root / "repo"
    ops = (repo / "calc" / "ops.py").read_text()
    complete_by_hand(server.state, "001-greeting", {"calc/ops.py": ops + "\nGREETING = 'hello'\n"})
    assert c.post("/api/tickets/001-greeting/merge").json()["status"] == "merged"
    (repo / "calc" / "ops.py").write_text(ops + "\nGREETING = 'hello, built on it'\n")
    commit_all(repo, "later work on the ticket's line")
    return repo


def test_a_revert_that_conflicts_is_a_409_naming_its_worktree_then_lands(server, project):
    c = server.client
    repo = _merged_then_built_on(server, project)
    head = branch_commit(repo, "main")
    r = c.post("/api/tickets/001-greeting/revert")
    assert r.status_code == 409, r.text
    body = r.json()
    work = Path(body["worktree"])
    assert body["conflicts"] == ["calc/ops.py"] and body["status"] == "merged"
    assert f"The revert waits in {work}" in body["error"] and body["error"] == body["message"]
    assert branch_commit(repo, "main") == head and "<<<<<<<" in (work / "calc" / "ops.py").read_text()
    again = c.post("/api/tickets/001-greeting/revert")  # not resolved: 409 again, still nothing changed
    assert again.status_code == 409 and "is not finished: calc/ops.py still conflicts" in again.json()["error"]
    (work / "calc" / "ops.py").write_text("# resolved by the user\n")
    commit_all(work, "the resolved revert")
    landed = c.post("/api/tickets/001-greeting/revert")
    assert landed.status_code == 200 and landed.json()["status"] == "reverted", landed.text
    assert (repo / "calc" / "ops.py").read_text() == "# resolved by the user\n" and not work.exists()
    assert c.get("/api/tickets/001-greeting").json()["status"] == "reverted"


def test_revert_done_from_the_api_checks_the_base_branch(server, project):
    from server_helpers import complete_by_hand

    c = server.client
    repo = project.root / "repo"
    ops = (repo / "calc" / "ops.py").read_text()
    complete_by_hand(server.state, "001-greeting", {"calc/ops.py": ops + "\nGREETING = 'hello'\n"})
    c.post("/api/tickets/001-greeting/merge")
    refused = c.post("/api/tickets/001-greeting/revert", json={"done": True})
    assert refused.status_code == 400, refused.text
    assert ("main still holds ticket 001-greeting's change: calc/ops.py (still has `GREETING = 'hello'`)"
            in refused.json()["error"])
    assert c.post("/api/tickets/001-greeting/revert", json={"done": True, "typo": 1}).status_code == 400
    assert c.get("/api/tickets/001-greeting").json()["status"] == "merged"
    (repo / "calc" / "ops.py").write_text(ops)
    commit_all(repo, "undone by hand")
    done = c.post("/api/tickets/001-greeting/revert", json={"done": True})
    assert done.status_code == 200 and "undone by hand on main (checked:" in done.json()["message"]
    assert c.get("/api/tickets/001-greeting").json()["status"] == "reverted"


def test_reverting_a_dependency_of_a_merged_ticket_warns_in_the_answer(server, project):
    from server_helpers import complete_by_hand

    c = server.client
    folder = project.resolve(project.project.tickets_dir)
    (folder / "on-top.md").write_text("---\ntitle: On top\nproject: calc\nid: on-top\n"
                                      "depends_on: [001-greeting]\n---\nBody.\n")
    complete_by_hand(server.state, "001-greeting", {"calc/hello.txt": "hello\n"})
    c.post("/api/tickets/001-greeting/merge")
    complete_by_hand(server.state, "on-top", {"calc/top.txt": "top\n"})
    c.post("/api/tickets/on-top/merge")
    r = c.post("/api/tickets/001-greeting/revert")
    assert r.status_code == 200 and r.json()["status"] == "reverted"
    assert r.json()["warnings"] == ["ticket on-top is merged and depends on 001-greeting: its code stays on "
                                    "main and may need 001-greeting's; revert it too if so "
                                    "(`middle revert on-top`)"]


def test_discard_over_untracked_files_is_refused_with_their_list_unless_forced(server, project):
    from server_helpers import complete_by_hand

    c = server.client
    complete_by_hand(server.state, "001-greeting", {"calc/hello.txt": "hello\n"})
    work = Path(c.get("/api/tickets/001-greeting").json()["runs"][0]["worktree"])
    (work / "notes.txt").write_text("mine\n")
    for route in ("discard", "revert"):
        r = c.post(f"/api/tickets/001-greeting/{route}")
        assert r.status_code == 400 and r.json()["untracked"] == ["notes.txt"], r.text
        assert "`middle discard 001-greeting --force`" in r.json()["error"]
    assert (work / "notes.txt").exists() and c.get("/api/tickets/001-greeting").json()["status"] == "complete"
    r = c.post("/api/tickets/001-greeting/discard", json={"force": True})
    assert r.status_code == 200 and r.json()["status"] == "discarded" and not work.exists()
