"""The end of a run is one transaction with one owner: status, run, claim, run_end event, once."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from orchestrator.lifecycle.run_lifecycle import RunLifecycle
from orchestrator.plugin_api import hookimpl
from orchestrator.plugins.manager import PluginRegistry
from tickets.model import Ticket
from tickets.store import TicketStore


def _ticket(tmp_path: Path, tid: str = "t1") -> Ticket:
    return Ticket(id=tid, project_id="p", title="T", project_path=str(tmp_path))


class Recorder:
    """A plugin that records the lifecycle hooks it receives."""

    def __init__(self):
        self.calls: list[str] = []

    @hookimpl
    def on_ticket_failed(self, ticket, run_id, reason):
        self.calls.append(f"failed {ticket.id} {reason}")

    @hookimpl
    def on_ticket_complete(self, ticket, run_id, summary):
        self.calls.append(f"complete {ticket.id}")


def test_end_run_writes_everything_at_once_and_only_once(tmp_path):
    with TicketStore(tmp_path / "db.sqlite3") as store:
        store.upsert_ticket(_ticket(tmp_path))
        run_id = store.claim_new_run("t1", ["pending"])
        assert run_id is not None
        store.start_turn(run_id, 1, "p", "s", False)
        store.finish_turn(run_id, 1, response="r", is_error=False, error=None, cost_usd=0.25,
                          duration_ms=1, usage={}, num_turns=1)
        assert store.end_run("t1", run_id, "complete", None, ticket_reason="summary")
        ticket, run = store.get_ticket("t1"), store.get_run(run_id)
        assert (ticket.status.value, ticket.status_reason) == ("complete", "summary")
        assert run["status"] == "complete" and run["ended_at"] and run["total_cost_usd"] == 0.25
        assert store.get_claim("t1") is None
        ends = [e for e in store.list_events(run_id=run_id) if e["kind"] == "run_end"]
        assert [e["data"] for e in ends] == [{"status": "complete", "reason": "", "turns": 1, "cost_usd": 0.25}]
        # A second end (a node re-run on resume, a shutdown racing the run) changes nothing.
        assert not store.end_run("t1", run_id, "failed", "late")
        assert store.get_ticket("t1").status.value == "complete"
        assert len([e for e in store.list_events(run_id=run_id) if e["kind"] == "run_end"]) == 1


def test_an_old_run_ending_late_does_not_clobber_the_ticket_a_newer_run_holds(tmp_path):
    with TicketStore(tmp_path / "db.sqlite3") as store:
        store.upsert_ticket(_ticket(tmp_path))
        old = store.claim_new_run("t1", ["pending"])
        assert old is not None
        # A newer run of the ticket holds the claim now (as after a takeover and a rerun).
        with store._write() as conn:
            conn.execute("UPDATE claims SET run_id = 'other' WHERE ticket_id = 't1'")
        assert store.end_run("t1", old, "failed", "too late")
        assert store.get_ticket("t1").status.value == "running"  # the newer run's, untouched
        assert store.get_claim("t1").run_id == "other"


def test_interrupt_marks_the_running_turn_and_keeps_it_resumable(tmp_path):
    with TicketStore(tmp_path / "db.sqlite3") as store:
        store.upsert_ticket(_ticket(tmp_path))
        run_id = store.claim_new_run("t1", ["pending"])
        assert run_id is not None
        store.start_turn(run_id, 1, "p", "s", False)
        RunLifecycle(store).interrupt("t1", run_id, "stopped by SIGTERM: continue with `middle resume t1`")
        assert store.get_turn(run_id, 1)["status"] == "interrupted"
        assert store.get_ticket("t1").status.value == "interrupted"
        end = [e for e in store.list_events(run_id=run_id) if e["kind"] == "run_end"][0]["data"]
        assert end["resumable"] is True and end["status"] == "interrupted"


def test_hooks_fire_once_per_run_end(tmp_path):
    recorder = Recorder()
    hooks = PluginRegistry(load_entry_points=False, extra_plugins=(recorder,)).hook
    with TicketStore(tmp_path / "db.sqlite3") as store:
        life = RunLifecycle(store, hooks)
        store.upsert_ticket(_ticket(tmp_path))
        run_id = store.claim_new_run("t1", ["pending"])
        assert run_id is not None
        assert life.fail("t1", run_id, "limit", resumable=False)
        assert not life.fail("t1", run_id, "limit again")
        assert not life.complete("t1", run_id, "no")
    assert recorder.calls == ["failed t1 limit"]


def _end(db: str, run_id: str, status: str, barrier) -> bool:
    with TicketStore(db) as store:
        barrier.wait(10)
        return store.end_run("t1", run_id, status, f"by {status}")


def test_two_processes_ending_one_run_at_once_end_it_once(store_target, tmp_path):
    db = store_target
    with TicketStore(db) as store:
        store.upsert_ticket(_ticket(tmp_path))
        run_id = store.claim_new_run("t1", ["pending"])
        assert run_id is not None
    ctx = mp.get_context("spawn")
    barrier = ctx.Manager().Barrier(2)
    with ctx.Pool(2) as pool:
        results = pool.starmap(_end, [(db, run_id, "complete", barrier), (db, run_id, "interrupted", barrier)])
    assert sorted(results) == [False, True]
    with TicketStore(db) as store:
        ends = [e for e in store.list_events(run_id=run_id) if e["kind"] == "run_end"]
        assert len(ends) == 1 and ends[0]["data"]["status"] == store.get_run(run_id)["status"]


@pytest.mark.parametrize("bad", ["not-a-status"])
def test_an_unknown_status_is_refused(tmp_path, bad):
    with TicketStore(tmp_path / "db.sqlite3") as store:
        store.upsert_ticket(_ticket(tmp_path))
        run_id = store.claim_new_run("t1", ["pending"])
        assert run_id is not None
        with pytest.raises(ValueError):
            store.end_run("t1", run_id, bad)


def _add_events(url: str, run_id: str, stop_file: str) -> None:
    """Add an event every 0.2 s until told to stop (so a follower that starts late still sees one)."""
    import os
    import time

    with TicketStore(url) as store:
        for _ in range(300):
            if os.path.exists(stop_file):
                return
            store.add_event(run_id, "t1", "note", {"text": "from another process"})
            time.sleep(0.2)


@pytest.mark.postgres
def test_postgresql_pushes_a_run_event_to_followers_in_other_processes(pg_url, tmp_path):
    """LISTEN/NOTIFY: a follower is woken by the event itself (True), not by its timeout (False)."""
    import threading

    with TicketStore(pg_url) as store:
        assert store.pushes_events
        store.upsert_ticket(_ticket(tmp_path))
        run_id = store.claim_new_run("t1", ["pending"])
        assert run_id is not None
        assert store.wait_for_events(0.2) is False  # nothing happened: the wait times out
        woken: list[bool] = []
        follower = threading.Thread(target=lambda: woken.append(store.wait_for_events(60)))
        follower.start()
        stop = tmp_path / "stop"
        writer = mp.get_context("spawn").Process(target=_add_events, args=(pg_url, run_id, str(stop)))
        writer.start()
        follower.join(90)
        stop.write_text("")
        writer.join(60)
        assert woken == [True]  # woken by a notification, long before its 60 s timeout
        assert store.list_events(run_id=run_id)[0]["data"]["text"] == "from another process"
