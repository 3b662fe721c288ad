"""The store's queue (tickets/queue.py), on SQLite and PostgreSQL: the next runnable ticket is
claimed in one transaction with its dependencies resolved by the store, racing processes get each
ticket once, and idle workers are woken by runnable tickets only, never by run events."""

from __future__ import annotations

import multiprocessing as mp
import threading
from pathlib import Path

import pytest

from tickets.model import Ticket
from tickets.store import SCHEMA_VERSION, TicketStore


def _ticket(tid: str, tmp_path: Path, deps: list[str] | None = None) -> Ticket:
    return Ticket(id=tid, project_id="p", title=tid, project_path=str(tmp_path), depends_on=deps or [])


def _count_transactions(store: TicketStore) -> list[str]:
    """Every transaction the store opens from now on: a write, or (PostgreSQL) one statement in
    a transaction of its own."""
    calls: list[str] = []

    def counted(name: str):
        real = getattr(store._db, name)

        def call(*args):
            calls.append(name)
            return real(*args)
        return call

    for name in ("write", "statement", "read"):
        if hasattr(store._db, name):
            setattr(store._db, name, counted(name))
    return calls


def test_the_next_ticket_is_claimed_in_one_transaction_and_waits_for_its_dependencies(store_target, tmp_path):
    with TicketStore(store_target) as store:
        store.upsert_ticket(_ticket("b", tmp_path, ["a"]))  # filed first, but waits for a
        store.upsert_ticket(_ticket("a", tmp_path))
        transactions = _count_transactions(store)
        first = store.claim_next(dependencies="merged")
        assert first is not None and first.ticket_id == "a" and len(transactions) == 1
        assert store.get_claim("a").token == first.token
        assert store.get_ticket("a").status.value == "running"
        assert store.claim_next(dependencies="merged") is None  # b waits for a
        store.end_run("a", first.run_id, "complete")
        assert store.claim_next(dependencies="merged") is None  # complete is not merged
        second = store.claim_next(dependencies="complete")  # a complete dependency lets it start
        assert second is not None and second.ticket_id == "b"
        assert store.claim_next(dependencies="complete") is None


def test_a_ticket_whose_dependency_merges_becomes_claimable(store_target, tmp_path):
    with TicketStore(store_target) as store:
        store.upsert_ticket(_ticket("a", tmp_path))
        store.upsert_ticket(_ticket("b", tmp_path, ["a", "ghost"]))
        a = store.claim_next()
        store.end_run("a", a.run_id, "complete")
        store.set_status("a", "merged")
        assert store.claim_next() is None  # still waits for a ticket that does not exist
        store.upsert_ticket(_ticket("b", tmp_path, ["a"]))  # its file fixed: the edges follow
        assert store.claim_next().ticket_id == "b"


def test_a_store_of_schema_10_gets_its_dependency_edges(tmp_path):
    import sqlite3

    path = tmp_path / "t.sqlite"
    with TicketStore(path) as store:
        store.upsert_ticket(_ticket("a", tmp_path))
        store.upsert_ticket(_ticket("b", tmp_path, ["a"]))
    conn = sqlite3.connect(path)  # as schema 10 left it: no edges, no retry columns' indexes
    conn.executescript("DELETE FROM ticket_deps; DROP INDEX tickets_to_retry; ALTER TABLE tickets DROP COLUMN"
                       " retry_at; DELETE FROM schema_version; INSERT INTO schema_version VALUES (10);")
    conn.close()
    with TicketStore(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
        a = store.claim_next()
        assert a.ticket_id == "a" and store.claim_next() is None  # b still waits for a
        store.end_run("a", a.run_id, "complete")
        store.set_status("a", "merged")
        assert store.claim_next().ticket_id == "b"


def _claim_all(target: str, out) -> None:
    won = []
    with TicketStore(target) as store:
        while (new := store.claim_next()) is not None:
            won.append(new.ticket_id)
    out.put(won)


def test_processes_racing_for_the_queue_get_each_ticket_once(store_target, tmp_path):
    with TicketStore(store_target) as store:
        for i in range(40):
            store.upsert_ticket(_ticket(f"t{i:02d}", tmp_path))
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_claim_all, args=(store_target, out)) for _ in range(4)]
    for p in procs:
        p.start()
    won = [tid for _ in procs for tid in out.get(timeout=120)]
    for p in procs:
        p.join(30)
    assert sorted(won) == [f"t{i:02d}" for i in range(40)]  # each once, none left


def _write_events(target: str, run_id: str, n: int, then_file: bool, tmp: str) -> None:
    with TicketStore(target) as store:
        for i in range(n):
            store.add_event(run_id, "busy", "note", {"text": f"step {i}"})
        if then_file:
            store.upsert_ticket(_ticket("new", Path(tmp)))


@pytest.mark.postgres
def test_an_idle_worker_is_woken_by_a_runnable_ticket_never_by_run_events(pg_url, tmp_path):
    with TicketStore(pg_url) as setup:
        setup.upsert_ticket(_ticket("busy", tmp_path))
        run = setup.claim_next()
    ctx = mp.get_context("spawn")
    with TicketStore(pg_url) as idle:
        idle.runnable_seen()  # listening
        events = ctx.Process(target=_write_events, args=(pg_url, run.run_id, 20, False, str(tmp_path)))
        events.start()
        woken = []
        events.join(60)
        assert events.exitcode == 0
        woken.append(idle.wait_for_runnable(1.0))  # twenty events of another run: still asleep
        filing = ctx.Process(target=_write_events, args=(pg_url, run.run_id, 0, True, str(tmp_path)))
        filing.start()
        woken.append(idle.wait_for_runnable(30.0))
        filing.join(60)
        assert woken == [False, True]


@pytest.mark.postgres
def test_a_finished_dependency_wakes_idle_workers_and_an_unrelated_end_does_not(pg_url, tmp_path):
    with TicketStore(pg_url) as store, TicketStore(pg_url) as idle:
        store.upsert_ticket(_ticket("a", tmp_path))
        store.upsert_ticket(_ticket("lone", tmp_path))
        store.upsert_ticket(_ticket("b", tmp_path, ["a"]))
        a, lone = store.claim_next(dependencies="complete"), store.claim_next(dependencies="complete")
        idle.runnable_seen()
        seen = idle.runnable_seen()
        store.end_run("lone", lone.run_id, "failed", "gave up")  # nothing waits for it
        assert idle.wait_for_runnable(1.0) is False and idle.runnable_seen() == seen
        done = threading.Thread(target=store.end_run, args=("a", a.run_id, "complete"))
        done.start()
        assert idle.wait_for_runnable(30.0) is True  # b may start now
        done.join(30)
        assert idle.claim_next(dependencies="complete").ticket_id == "b"
