"""The Resume button and the resume API agree: shown (and `resumable` in the ticket JSON) exactly when
`POST /api/tickets/{id}/resume` is accepted.

Runs are scripted on the fake Messages API (real Claude Code CLI), so a turn can be held open
while the server that drives it stops, which leaves the run interrupted as a real shutdown does.
"""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from typing import Any, Iterator

import httpx
import pytest
from server_helpers import Stall, decide, plan, wait_for_run

from orchestrator.fake_api.replies import reply, text
from orchestrator.fake_api.scripted import ScriptedResponder
from orchestrator.server import create_app
from orchestrator.server.live import ServerThread
from orchestrator.services import Services

pytestmark = pytest.mark.cli
HTML = {"Accept": "text/html"}


@contextmanager
def scripted_server(config: Any, script: ScriptedResponder) -> Iterator[httpx.Client]:
    """The app on the fake API answering from `script`; stopping it interrupts the runs it drives."""
    services = Services(config, fake=True, responder=script)
    app = create_app(config, services=services)
    try:
        with ServerThread(app) as thread, httpx.Client(base_url=thread.url, timeout=60) as client:
            client.thread = thread  # type: ignore[attr-defined]
            yield client
    finally:
        app.state.middle.runs.join(timeout=180)
        services.close()


def resume_offered(c: httpx.Client, ticket_id: str) -> bool:
    """What the ticket JSON says, checked against what the ticket page shows."""
    resumable = c.get(f"/api/tickets/{ticket_id}").json()["resumable"]
    page = c.get(f"/tickets/{ticket_id}", headers=HTML).text
    assert ('data-action="resume"' in page) is resumable, page[page.find('class="actions"'):][:600]
    return resumable


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_resume_is_offered_exactly_when_the_api_accepts_it(project, claude_cli):
    first = Stall()
    script = ScriptedResponder().agent(plan("Say hello.")).coding_agent(first)
    with scripted_server(project, script) as c:
        run_id = c.post("/api/tickets/001-greeting/run").json()["run_id"]
        assert first.wait_for(1), "Claude Code never got its turn"
        assert c.get("/api/tickets/001-greeting").json()["status"] == "running"
        assert resume_offered(c, "001-greeting") is False  # running here
        r = c.post("/api/tickets/001-greeting/resume")
        assert r.status_code == 409, r.text
    first.release.set()  # the server has stopped: the run was marked interrupted

    again = Stall()
    with scripted_server(project, ScriptedResponder().coding_agent(again)) as c:
        ticket = c.get("/api/tickets/001-greeting").json()
        assert ticket["status"] == "interrupted"
        assert resume_offered(c, "001-greeting") is True
        r = c.post("/api/tickets/001-greeting/resume")
        assert r.status_code == 202 and r.json()["run_id"] == run_id, r.text
        assert again.wait_for(1)
    again.release.set()

    script = ScriptedResponder().coding_agent(reply(text("Said hello."))).agent(decide(True, "Said hello."))
    script.agent(plan("Look around."), decide(False, "Nothing in this ticket can be done."))
    script.coding_agent(reply(text("I looked around.")))
    with scripted_server(project, script) as c:
        store = c.thread.app.state.middle.store  # type: ignore[attr-defined]
        # What kill -9 of the process running it leaves: the run `running`, claimed by a dead pid.
        store.claim_for_resume("001-greeting", run_id, pid=dead_pid())
        assert c.get("/api/tickets/001-greeting").json()["status"] == "running"
        assert resume_offered(c, "001-greeting") is True
        r = c.post("/api/tickets/001-greeting/resume")
        assert r.status_code == 202 and r.json()["run_id"] == run_id, r.text
        assert c.get(f"/api/runs/{run_id}").json()["status"] in ("running", "complete")
        assert wait_for_run(c, run_id)["status"] == "complete"
        assert resume_offered(c, "001-greeting") is False
        r = c.post("/api/tickets/001-greeting/resume")
        assert r.status_code == 400 and "already ended" in r.json()["error"]

        # The middle agent ends a run as failed (no next step): a new run, not a resume.
        failed_run = c.post("/api/tickets/002-farewell/run").json()["run_id"]
        run = wait_for_run(c, failed_run)
        assert run["status"] == "failed" and "neither completed" in run["reason"]
        assert resume_offered(c, "002-farewell") is False
        r = c.post("/api/tickets/002-farewell/resume")
        assert r.status_code == 400 and "already ended" in r.json()["error"]
        page = c.get("/tickets/002-farewell", headers=HTML).text
        assert 'data-action="run"' in page  # what the user can do instead
