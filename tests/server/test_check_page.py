"""The ticket page and the tickets API show a run's checks: a badge with the outcome and the
corrections, each check's output, and the JSON of all of it."""

from __future__ import annotations

from server_helpers import make_project

from tickets.model import Ticket


def test_the_ticket_page_shows_the_checks_badge_and_output(serve, tmp_path):
    config = make_project(tmp_path)
    server = serve(config)
    store = server.app.state.middle.store
    store.upsert_ticket(Ticket(id="t9", project_id="calc", title="Checked", project_path=str(tmp_path / "repo")))
    run_id = store.claim_new_run("t9", ("pending",))
    assert run_id is not None
    store.start_turn(run_id, 1, "Add the feature", "s1", False)
    store.finish_turn(run_id, 1, response="Added it.", is_error=False, error=None, cost_usd=0.01,
                      duration_ms=5, usage={}, num_turns=1)
    store.add_event(run_id, "t9", "check", {"command": "pytest -q", "phase": "base", "exit_code": 0,
                                            "duration_s": 1.5, "tail": "3 passed", "timed_out": False})
    store.add_event(run_id, "t9", "check", {"command": "pytest -q", "phase": "check", "round": 1, "turn": 1,
                                            "exit_code": 1, "duration_s": 2.0, "outcome": "failed",
                                            "tail": "FAILED test_x.py::test_new - boom", "timed_out": False,
                                            "new_failures": ["test_x.py::test_new"], "already_failing": []})
    store.set_run_fields(run_id, check_status="failed", corrections=1)
    store.end_run("t9", run_id, "failed", "check `pytest -q` still failing after 1 round(s)")
    page = server.client.get("/tickets/t9", headers={"Accept": "text/html"}).text
    assert "check failed" in page and "1 correction" in page
    assert "FAILED test_x.py::test_new - boom" in page and "Failing because of this ticket: test_x.py::test_new" in page
    assert "base check passed" in page
    data = server.client.get("/api/tickets/t9").json()
    run = data["runs"][0]
    assert (run["check_status"], run["corrections"]) == ("failed", 1)
    assert run["checks"]["1"][0]["outcome"] == "failed" and run["checks"]["0"][0]["phase"] == "base"
