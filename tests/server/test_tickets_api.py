"""The tickets API: list, read, create (a Markdown file), run / resume / revert on the offline model."""

from __future__ import annotations

import subprocess
import sys

import pytest
from server_helpers import wait_for_run


def test_list_filters_and_404s(server):
    c = server.client
    tickets = c.get("/api/tickets").json()["tickets"]
    assert [t["id"] for t in tickets] == ["001-greeting", "002-farewell", "003-multiply"]
    assert tickets[0]["status"] == "pending" and tickets[0]["turns"] == 0
    assert c.get("/api/tickets", params={"project": "other"}).json()["tickets"] == []
    assert len(c.get("/api/tickets", params={"status": "pending", "project": "calc"}).json()["tickets"]) == 3
    r = c.get("/api/tickets", params={"status": "bogus"})
    assert r.status_code == 400 and "unknown ticket status" in r.json()["error"]
    assert c.get("/api/tickets/nope").status_code == 404
    assert "no ticket 'nope'" in c.get("/api/tickets/nope").json()["error"]
    assert c.get("/api/runs/nope").status_code == 404
    assert c.post("/api/tickets/nope/run").status_code == 404
    assert c.get("/api/nothing-here").json()["error"].startswith("nothing at /api/nothing-here")


def test_create_writes_a_markdown_ticket_file(server, project):
    c = server.client
    r = c.post("/api/tickets", json={"title": "Add subtraction: a - b", "project": "calc",
                                     "description": "Create `calc/sub.py`.\nSee https://example.com/spec"})
    assert r.status_code == 201, r.text
    ticket = r.json()
    assert ticket["id"] == "004-add-subtraction-a-b" and ticket["status"] == "pending"
    path = project.root / "tickets" / "004-add-subtraction-a-b.md"
    assert path.read_text().startswith("---\ntitle: 'Add subtraction: a - b'\nproject: calc\n---\n")
    assert c.get("/api/tickets/004-add-subtraction-a-b").json()["description"].endswith("example.com/spec")

    dup = c.post("/api/tickets", json={"title": "Again", "project": "calc", "id": "004-add-subtraction-a-b"})
    assert dup.status_code == 409 and "already exists" in dup.json()["error"]
    bad = c.post("/api/tickets", json={"title": "X", "project": "../etc"})
    assert bad.status_code == 400 and bad.json()["error"].startswith("project id '../etc'")
    nopath = c.post("/api/tickets", json={"title": "X", "project": "calc", "id": "005-x",
                                          "path": "../repo/missing-dir"})
    assert nopath.status_code == 400 and "does not exist" in nopath.json()["error"]
    assert not (project.root / "tickets" / "005-x.md").exists()
    assert c.post("/api/tickets", json={"project": "calc"}).json()["error"] == "bad request: title is required"
    assert sorted(p.name for p in (project.root / "tickets").iterdir()) == [
        "001-greeting.md", "002-farewell.md", "003-multiply.md", "004-add-subtraction-a-b.md"]


def test_create_without_a_project_takes_the_configured_one(serve, project):
    """As a ticket file without `project:` belongs to [project] id, so does a ticket the API
    creates without one; with no [project] id either, a 400 that says what to give."""
    r = serve(project).client.post("/api/tickets", json={"title": "Add division"})
    assert r.status_code == 201, r.text
    assert r.json()["project_id"] == "calc"
    unnamed = project.model_copy(update={"project": project.project.model_copy(update={"id": None})})
    r = serve(unnamed).client.post("/api/tickets", json={"title": "Add modulo"})
    assert r.status_code == 400 and r.json()["error"].startswith("project is required: give the ticket's project id")


@pytest.mark.cli
def test_run_in_background_then_diff_merge_and_revert(server, claude_cli, project):
    c = server.client
    r = c.post("/api/tickets/001-greeting/run")
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    again = c.post("/api/tickets/001-greeting/run")  # one run per ticket at a time
    assert again.status_code in (400, 409), again.text  # 409 while running; 400 once complete
    run = wait_for_run(server, run_id)
    assert run["status"] == "complete" and len(run["turns"]) == 1
    greeting = project.root / "repo" / "calc" / "greeting.py"
    assert not greeting.exists()  # on the ticket's branch only, until merged
    assert run["branch"] == "middle/001-greeting" and run["head_commit"]
    assert run["changes"] == [{"path": "calc/greeting.py", "added": 5, "deleted": 0}]

    detail = c.get("/api/tickets/001-greeting").json()
    assert detail["status"] == "complete" and detail["turns"] == 1
    # The fake model's made-up cost stays in the run's record but is not counted as money spent.
    assert detail["cost_usd"] == 0 and detail["offline_runs"] == 1 and detail["runs"][0]["offline"] == 1
    assert detail["runs"][0]["turns"][0]["cost_usd"] > 0 and detail["resumable"] is False
    turn = detail["runs"][0]["turns"][0]
    assert "calc/greeting.py" in turn["prompt"] and turn["decision"]["complete"] is True
    summary_doc = detail["memory_docs"][0]["doc"]
    assert summary_doc.startswith("Ticket: Add a greeting module.")
    assert summary_doc in [d["text"] for d in c.get("/api/projects/calc/memory/docs").json()["docs"]]
    events = c.get(f"/api/runs/{run_id}/events").json()
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end" and "decision" in kinds
    assert any(e["kind"] == "coding_agent" and e["data"].get("type") == "tool_use" for e in events)

    diff = c.get("/api/tickets/001-greeting/diff").json()
    assert [f["path"] for f in diff["files"]] == ["calc/greeting.py"] and diff["merged"] is False
    assert "+def greet(name: str) -> str:" in diff["files"][0]["patch"]
    r = c.post("/api/tickets/001-greeting/run")
    assert r.status_code == 400 and "unmerged change on middle/001-greeting" in r.json()["error"]
    r = c.post("/api/tickets/001-greeting/resume")
    assert r.status_code == 400 and "already ended" in r.json()["error"]
    r = c.post("/api/tickets/001-greeting/merge")
    assert r.status_code == 200 and r.json()["status"] == "merged", r.text
    assert greeting.is_file() and c.get("/api/tickets/001-greeting").json()["status"] == "merged"
    r = c.post("/api/tickets/001-greeting/revert")
    assert r.status_code == 200 and r.json()["removed"] == 1 and r.json()["commit"], r.text
    assert "revert commit" in r.json()["message"]
    assert not greeting.exists()  # the revert commit undid the code
    assert c.get("/api/tickets/001-greeting").json()["status"] == "reverted"
    assert summary_doc not in [d["text"] for d in c.get("/api/projects/calc/memory/docs").json()["docs"]]
    totals = c.get("/api/projects").json()
    assert totals[0]["project"] == "calc" and totals[0]["offline_runs"] == 1
    assert totals[0]["cost_total_usd"] == totals[0]["cost_today_usd"] == 0


def test_a_ticket_claimed_by_another_process_is_409(server):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        server.state.sync_folder()
        server.state.store.claim_new_run("002-farewell", ["pending"], pid=holder.pid)
        r = server.client.post("/api/tickets/002-farewell/run")
        assert r.status_code == 409 and "being worked by" in r.json()["error"]
        r = server.client.post("/api/tickets/002-farewell/revert")
        assert r.status_code == 400 and "is running" in r.json()["error"]
        # A live claim: no Resume button, and the API refuses a resume too.
        assert server.client.get("/api/tickets/002-farewell").json()["resumable"] is False
        page = server.client.get("/tickets/002-farewell", headers={"Accept": "text/html"}).text
        assert 'data-action="resume"' not in page
        assert server.client.post("/api/tickets/002-farewell/resume").status_code == 409
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.cli
def test_the_board_shows_a_run_made_by_another_process(server, claude_cli, project):
    assert server.client.get("/api/tickets/003-multiply").json()["status"] == "pending"
    result = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "--config", str(project.source),
                             "run", "--fake", "003-multiply"], capture_output=True, text=True, timeout=240,
                            cwd=project.root)
    assert result.returncode == 0, result.stdout + result.stderr
    ticket = server.client.get("/api/tickets/003-multiply").json()
    assert ticket["status"] == "complete" and ticket["turns"] == 1
    board = server.client.get("/", headers={"Accept": "text/html"}).text
    column = board[board.index('data-status="complete"'):board.index('data-status="failed"')]
    assert 'data-ticket="003-multiply"' in column


def test_start_errors_come_back_to_the_caller(serve, tmp_path, monkeypatch):
    from server_helpers import make_project

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    served = serve(make_project(tmp_path), fake=False)
    r = served.client.post("/api/tickets/001-greeting/run")
    assert r.status_code == 400 and "ANTHROPIC_API_KEY is not set" in r.json()["error"]
    assert served.client.get("/api/tickets/001-greeting").json()["status"] == "pending"
    assert served.state.runs.active() == {}  # nothing is left running in the background


@pytest.mark.cli
def test_a_failed_run_shows_its_reason_and_resumes(server, claude_cli, project):
    c = server.client
    assert c.get("/api/tickets/001-greeting").status_code == 200  # loaded from the folder
    repo = project.root / "repo"
    repo.rename(project.root / "repo.away")
    run_id = c.post("/api/tickets/001-greeting/run").json()["run_id"]
    run = wait_for_run(server, run_id)
    assert run["status"] == "failed" and "does not exist" in run["reason"]
    page = c.get("/tickets/001-greeting", headers={"Accept": "text/html"}).text
    assert 'class="reason error-box"' in page and "does not exist" in page and 'data-action="resume"' in page
    assert c.get("/api/tickets/001-greeting").json()["resumable"] is True  # a failure the runner can retry

    (project.root / "repo.away").rename(repo)
    r = c.post("/api/tickets/001-greeting/resume")
    assert r.status_code == 202 and r.json()["run_id"] == run_id
    assert wait_for_run(server, run_id)["status"] == "complete"
    assert c.get("/api/tickets/001-greeting").json()["status"] == "complete"


def test_listing_reads_the_resume_facts_of_all_failed_tickets_at_once(server, monkeypatch):
    """GET /api/tickets says for every failed ticket whether it can be resumed, in the same
    number of store reads for two failed tickets as for six."""
    store = server.state.store
    ids = [server.client.post("/api/tickets", json={"title": f"Task {n}", "project": "calc"}
                              ).json()["id"] for n in range(6)]

    def fail(ticket_id: str, resumable: bool) -> None:
        run_id = store.claim_new_run(ticket_id, ["pending"])
        assert run_id is not None
        store.end_run(ticket_id, run_id, "failed", "boom", event={"resumable": resumable})

    reads: list[str] = []
    real_read = store._read
    monkeypatch.setattr(store, "_read", lambda sql, params=(): reads.append(sql) or real_read(sql, params))

    def listed() -> tuple[dict[str, bool], int]:
        reads.clear()
        tickets = server.client.get("/api/tickets").json()["tickets"]
        return {t["id"]: t["resumable"] for t in tickets if t["status"] == "failed"}, len(reads)

    fail(ids[0], True)
    fail(ids[1], False)
    few, few_reads = listed()
    assert few == {ids[0]: True, ids[1]: False}
    for n, ticket_id in enumerate(ids[2:]):
        fail(ticket_id, n % 2 == 0)
    many, many_reads = listed()
    assert many == {ids[0]: True, ids[1]: False, ids[2]: True, ids[3]: False, ids[4]: True,
                    ids[5]: False}
    assert many_reads == few_reads
    for ticket_id, resumable in many.items():  # the one-ticket page says the same
        assert server.client.get(f"/api/tickets/{ticket_id}").json()["resumable"] is resumable
