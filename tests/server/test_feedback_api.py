"""`POST /api/tickets/{id}/feedback` and the ticket page's "Request changes" box: a complete ticket
continues on its branch in a new round (the offline model does what the feedback asks), a running
one keeps the feedback for its next assess, and what cannot be done is refused with nothing changed."""

from __future__ import annotations

import pytest
from server_helpers import wait_for_run

from orchestrator.lifecycle.run_lifecycle import RUNNABLE

pytestmark = pytest.mark.cli

ASK = "Create `calc/extra.py` with:\n```python\nEXTRA = 1\n```\n"


def test_feedback_starts_a_round_on_the_branch_and_the_page_shows_it(server, claude_cli):
    c = server.client
    first = c.post("/api/tickets/001-greeting/run").json()["run_id"]
    assert wait_for_run(c, first)["status"] == "complete"
    page = c.get("/tickets/001-greeting", headers={"Accept": "text/html"}).text
    assert 'id="feedback-form"' in page and 'id="feedback-text"' in page

    started = c.post("/api/tickets/001-greeting/feedback", json={"text": ASK})
    assert started.status_code == 202 and started.json()["status"] == "running"
    second = started.json()["run_id"]
    assert second != first and wait_for_run(c, second)["status"] == "complete"
    ticket = c.get("/api/tickets/001-greeting").json()
    assert ticket["status"] == "complete" and [r["round"] for r in ticket["runs"]] == [2, 1]
    assert ticket["runs"][0]["feedback"][0]["text"] == ASK.strip()
    assert {f["path"] for f in c.get("/api/tickets/001-greeting/diff").json()["files"]} == {
        "calc/greeting.py", "calc/extra.py"}
    assert any("The human's review: Create `calc/extra.py`" in d["doc"] and not d["deleted"]
               for d in ticket["memory_docs"])
    page = c.get("/tickets/001-greeting", headers={"Accept": "text/html"}).text
    assert "Round 2: the human&#39;s feedback" in page or "Round 2: the human's feedback" in page


def test_feedback_for_a_running_ticket_is_stored_and_refusals_change_nothing(server):
    c = server.client
    server.state.sync_folder()
    store = server.state.store
    assert c.post("/api/tickets/nosuch/feedback", json={"text": "x"}).status_code == 404
    never = c.post("/api/tickets/001-greeting/feedback", json={"text": "x"})
    assert never.status_code == 400 and "has never run" in never.json()["error"]
    assert c.post("/api/tickets/001-greeting/feedback", json={}).status_code == 400
    run_id = store.claim_new_run("002-farewell", RUNNABLE)  # this process runs it, as far as the store knows
    empty = c.post("/api/tickets/002-farewell/feedback", json={"text": "   "})
    assert empty.status_code == 400 and "is empty" in empty.json()["error"]
    assert store.feedback(run_id) == []
    stored = c.post("/api/tickets/002-farewell/feedback", json={"text": "use f-strings"})
    assert stored.status_code == 200 and stored.json()["status"] == "stored"
    assert "next assessment" in stored.json()["message"]
    assert [e["text"] for e in store.feedback(run_id)] == ["use f-strings"]
    assert len(store.list_runs("002-farewell")) == 1


def test_a_round_a_pull_request_started_is_labelled_by_what_started_it_on_the_page(server):
    c = server.client
    server.state.sync_folder()
    store = server.state.store
    run_id = store.claim_new_run("001-greeting", RUNNABLE)
    store.end_run("001-greeting", run_id, "complete", None)
    by = "pull request #2: CI `tests`, review by alice"
    delivered = store.claim_round("001-greeting", "The pull request needs changes", lease_s=60, by=by)
    assert delivered is not None and delivered.number == 2
    page = c.get("/tickets/001-greeting", headers={"Accept": "text/html"}).text
    assert f"Round 2: feedback from {by}" in page and "the human" not in page
    opening = c.get("/api/tickets/001-greeting").json()["runs"][0]["feedback"][0]
    assert (opening["by"], opening["label"]) == (by, f"feedback from {by}")
