"""The background run manager against the real store: claim handshake, one run per ticket, shutdown, crashes.

The orchestrator here is a stand-in that claims through the real store and then waits, so a test
can look at a run while it is in progress; real runs are in test_tickets_api and the browser tests.
"""

from __future__ import annotations

import threading

import pytest

from orchestrator.errors import TicketError
from orchestrator.running.outcome import RunOutcome
from orchestrator.server.background_runs import RunManager
from orchestrator.server.errors import Conflict
from orchestrator.services import Services
from tickets.source import load_tickets


class HeldRun:
    """Claims like Orchestrator.run_ticket, then holds until released (or raises `crash`)."""

    def __init__(self, store, release: threading.Event, crash: BaseException | None = None):
        self.store, self.release, self.crash = store, release, crash

    def run_ticket(self, ticket_id: str, rerun: bool = False) -> RunOutcome:
        run_id = self.store.claim_new_run(ticket_id, ["pending", "failed"])
        if run_id is None:
            raise TicketError(f"ticket {ticket_id!r} is being worked by another run")
        self.store.add_event(run_id, ticket_id, "run_start", {"resume": False})
        self.release.wait(60)
        if self.crash is not None:
            raise self.crash
        self.store.end_run(ticket_id, run_id, "complete")
        return RunOutcome(ticket_id, run_id, "complete")

    def close(self) -> None:
        pass


@pytest.fixture
def services(tmp_path):
    from server_helpers import make_project

    config = make_project(tmp_path)
    svc = Services(config)
    for ticket in load_tickets(config.resolve("tickets"), config.resolve("repo")).tickets:
        svc.store.upsert_ticket(ticket)
    yield svc
    svc.close()


def test_start_returns_the_claimed_run_and_refuses_a_second_start(services):
    release = threading.Event()
    manager = RunManager(services, orchestrator_factory=lambda: HeldRun(services.store, release))
    run_id = manager.start("001-greeting")
    claim = services.store.get_claim("001-greeting")
    assert claim is not None and claim.run_id == run_id
    assert manager.active() == {"001-greeting": run_id}
    with pytest.raises(Conflict, match="already running in this server"):
        manager.start("001-greeting")
    release.set()
    manager.join(30)
    assert manager.active() == {}
    assert services.store.get_ticket("001-greeting").status.value == "complete"


def test_shutdown_marks_runs_in_progress_interrupted(services):
    release = threading.Event()
    manager = RunManager(services, orchestrator_factory=lambda: HeldRun(services.store, release))
    run_id = manager.start("002-farewell")
    assert manager.interrupt_all() == ["002-farewell"]
    ticket = services.store.get_ticket("002-farewell")
    assert ticket.status.value == "interrupted" and "middle resume 002-farewell" in ticket.status_reason
    assert services.store.get_run(run_id)["status"] == "interrupted"
    assert services.store.get_claim("002-farewell") is None
    assert services.store.list_events(run_id=run_id)[-1]["data"]["status"] == "interrupted"
    release.set()
    manager.join(30)


def test_a_crash_after_the_claim_marks_the_run_failed(services):
    release = threading.Event()
    release.set()
    crash = RuntimeError("unexpected bug")
    manager = RunManager(services, orchestrator_factory=lambda: HeldRun(services.store, release, crash))
    run_id = manager.start("003-multiply")
    manager.join(30)
    run = services.store.get_run(run_id)
    assert run["status"] == "failed" and "internal error: RuntimeError: unexpected bug" in run["reason"]
    assert services.store.get_ticket("003-multiply").status.value == "failed"
    assert services.store.list_events(run_id=run_id)[-1]["kind"] == "run_end"
    assert services.store.get_claim("003-multiply") is None  # a new run can start


def test_a_refused_claim_comes_back_as_the_error(services):
    store = services.store
    store.claim_new_run("001-greeting", ["pending"])  # this process holds it, outside the manager
    manager = RunManager(services, orchestrator_factory=lambda: HeldRun(store, threading.Event()))
    with pytest.raises(Conflict, match="being worked by another run"):
        manager.start("001-greeting")
    assert manager.active() == {}


class EndsThenTidies(HeldRun):
    """Ends its run in the store (resumably) when told, then keeps its thread busy tidying up until
    released."""

    def __init__(self, store, release: threading.Event, end: threading.Event):
        super().__init__(store, release)
        self.end = end

    def run_ticket(self, ticket_id: str, rerun: bool = False) -> RunOutcome:
        run_id = self.store.claim_new_run(ticket_id, ["pending", "failed"])
        assert run_id is not None
        self.end.wait(60)
        self.store.end_run(ticket_id, run_id, "failed", "Claude Code exited with code 1",
                           event={"resumable": True})
        self.release.wait(60)
        return RunOutcome(ticket_id, run_id, "failed")


def test_a_run_whose_end_is_stored_is_not_running_here_any_more(services):
    end, tidied = threading.Event(), threading.Event()
    manager = RunManager(services, orchestrator_factory=lambda: EndsThenTidies(services.store, tidied, end))
    run_id = manager.start("001-greeting")
    end.set()
    for _ in range(600):  # the run's thread stores its end right after its claim
        if services.store.get_run(run_id)["status"] == "failed":
            break
        threading.Event().wait(0.05)
    assert services.store.get_run(run_id)["status"] == "failed"
    assert manager.active() == {}  # so the page offers Resume (and merge is not "running")
    threading.Timer(0.1, tidied.set).start()  # the old thread finishes while the new start waits
    second = manager.start("001-greeting")  # not a 409: it waits for the ended run's thread
    assert second is not None and second != run_id
    manager.join(30)
    assert manager.active() == {}
