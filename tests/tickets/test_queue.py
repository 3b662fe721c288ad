"""The store's queue (tickets/queue.py), on SQLite and PostgreSQL: the next runnable ticket is
claimed in one transaction with its dependencies resolved by the store, racing processes get each
ticket once, and idle workers are woken by runnable tickets only, never by run events."""

from __future__ import annotations

import multiprocessing as mp
import re
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
    conn = sqlite3.connect(path)  # as schema 10 left it: no edges, no retry or runnable columns
    conn.executescript("DELETE FROM ticket_deps; DROP INDEX tickets_to_retry; DROP INDEX tickets_runnable;"
                       " DROP INDEX tickets_runnable_complete; ALTER TABLE tickets DROP COLUMN retry_at;"
                       " ALTER TABLE tickets DROP COLUMN deps_met;"
                       " DELETE FROM schema_version; INSERT INTO schema_version VALUES (10);")
    conn.close()
    with TicketStore(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
        a = store.claim_next()
        assert a.ticket_id == "a" and store.claim_next() is None  # b still waits for a
        store.end_run("a", a.run_id, "complete")
        store.set_status("a", "merged")
        assert store.claim_next().ticket_id == "b"


def _runnable(store: TicketStore, dependencies: str = "merged") -> list[str]:
    """What the store holds runnable, claimed and given back: each claim's ticket is put back to
    pending (a claim never changes a dependent's state), so the next asks the same backlog."""
    won = []
    while (new := store.claim_next(dependencies=dependencies)) is not None:
        won.append(new.ticket_id)
        store.end_run(new.ticket_id, new.run_id, "interrupted", "looked", ticket_status="pending")
        store.set_status(new.ticket_id, "failed", "set aside while the others are looked at")
    for tid in won:
        store.set_status(tid, "pending")
    return sorted(won)


def _finish(store: TicketStore, tid: str, status: str) -> None:
    run = store.claim_new_run(tid, ["pending"])
    assert run is not None
    store.end_run(tid, run, "complete")
    if status != "complete":
        store.set_status(tid, status)


def test_runnable_follows_each_dependency_as_it_completes_merges_is_discarded_or_reverted(store_target, tmp_path):
    with TicketStore(store_target) as store:
        store.upsert_ticket(_ticket("b", tmp_path, ["a"]))
        store.upsert_ticket(_ticket("c", tmp_path, ["a", "b"]))
        assert _runnable(store) == []  # a is filed after its dependent, so b counted it as no ticket
        store.upsert_ticket(_ticket("a", tmp_path))
        assert _runnable(store) == ["a"] and _runnable(store, "complete") == ["a"]
        _finish(store, "a", "complete")
        assert _runnable(store) == [] and _runnable(store, "complete") == ["b"]
        store.set_status("a", "merged")
        assert _runnable(store) == ["b"]
        store.set_status("a", "reverted")  # its change undone: b waits again
        assert _runnable(store) == [] and _runnable(store, "complete") == []
        store.set_status("a", "merged")
        _finish(store, "b", "merged")
        assert _runnable(store) == ["c"]
        store.set_status("b", "discarded")  # c waits for a ticket that will never land
        assert _runnable(store) == [] and _runnable(store, "complete") == []


def test_runnable_follows_the_ticket_file_when_its_depends_on_changes(store_target, tmp_path):
    with TicketStore(store_target) as store:
        store.upsert_ticket(_ticket("a", tmp_path))
        store.upsert_ticket(_ticket("b", tmp_path, ["a"]))
        assert _runnable(store) == ["a"]
        store.upsert_ticket(_ticket("b", tmp_path))  # its file no longer waits for a
        assert _runnable(store) == ["a", "b"]
        store.upsert_ticket(_ticket("b", tmp_path, ["ghost"]))  # a ticket that does not exist
        assert _runnable(store) == ["a"]
        store.upsert_ticket(_ticket("ghost", tmp_path))  # now it does, pending: b still waits
        assert _runnable(store) == ["a", "ghost"]


def test_a_round_or_a_resume_that_reopens_a_finished_dependency_blocks_its_dependents_again(store_target, tmp_path):
    with TicketStore(store_target) as store:
        store.upsert_ticket(_ticket("a", tmp_path))
        store.upsert_ticket(_ticket("b", tmp_path, ["a"]))
        _finish(store, "a", "complete")
        assert _runnable(store, "complete") == ["b"]
        assert store.claim_round("a", "one more thing", lease_s=60) is not None  # a runs again
        assert _runnable(store, "complete") == []
        run = store.latest_run("a")["id"]
        store.end_run("a", run, "complete")
        assert _runnable(store, "complete") == ["b"]
        store.claim_for_resume("a", run)
        assert _runnable(store, "complete") == []


def test_only_the_queue_writes_a_tickets_status_or_its_dependency_edges():
    """`deps_met` stays right only if every status and edge write goes through tickets/runnable.py
    (the claim's pending to running, in tickets/queue.py, changes no dependent's)."""
    root = Path(__file__).resolve().parents[2]
    writers: dict[str, set[str]] = {}
    for path in [*(root / "tickets").rglob("*.py"), *(root / "orchestrator").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        found = {m.group(1) for m in re.finditer(r"UPDATE tickets SET(.*?)WHERE", text, re.S)
                 if re.search(r"\bstatus = ", m.group(1))}
        found |= {"edges"} if re.search(r"(INSERT INTO|DELETE FROM|UPDATE) ticket_deps", text) else set()
        if found:
            writers[str(path.relative_to(root))] = found
    claims = writers.pop("tickets/queue.py", set())
    # The fleet bench files its backlog with raw SQL, then has every deps_met recomputed.
    bench = root / "orchestrator/bench/fleet.py"
    assert writers.pop("orchestrator/bench/fleet.py", set()) <= {"edges"} and "recompute_deps_met(" in bench.read_text()
    assert set(writers) == {"tickets/runnable.py"}, writers
    assert claims and all("status = 'running'" in c for c in claims), claims


def test_the_claim_reads_the_runnable_tickets_index_alone(store_target, tmp_path):
    from tickets.queue import pick_sql

    with TicketStore(store_target) as store:
        store.upsert_ticket(_ticket("a", tmp_path))
        db = store._db
        for mode, index in (("merged", "tickets_runnable"), ("complete", "tickets_runnable_complete")):
            sql = pick_sql(db, mode).replace(db.skip_locked, "")
            if db.dialect == "sqlite":
                plan = " ".join(str(tuple(r)) for r in db.read("EXPLAIN QUERY PLAN " + sql))
            else:  # a tiny table is cheaper to scan whole: ask whether the index can serve the pick
                with db.write() as conn:
                    conn.execute("SET LOCAL enable_seqscan = off")
                    plan = " ".join(str(r[0]) for r in conn.execute("EXPLAIN " + sql).fetchall())
            assert re.search(rf"\b{index}\b", plan), plan


def test_a_store_of_schema_12_computes_which_tickets_are_runnable(tmp_path):
    import sqlite3

    path = tmp_path / "t.sqlite"
    with TicketStore(path) as store:
        for tid, deps in (("a", []), ("b", ["a"]), ("c", ["b"])):
            store.upsert_ticket(_ticket(tid, tmp_path, deps))
        _finish(store, "a", "merged")
    conn = sqlite3.connect(path)  # as schema 12 left it: no deps_met (b would read as blocked)
    conn.executescript("DROP INDEX tickets_runnable; DROP INDEX tickets_runnable_complete;"
                       " ALTER TABLE tickets DROP COLUMN deps_met;"
                       " DELETE FROM schema_version; INSERT INTO schema_version VALUES (12);")
    conn.close()
    with TicketStore(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert _runnable(store) == ["b"]


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


def _work_all(target: str, out) -> None:
    """A worker's loop at full speed: claim, finish (complete), and again until nothing is left."""
    import time

    won = []
    with TicketStore(target) as store:
        while True:
            new = store.claim_next(dependencies="complete")
            if new is None:
                if not store.has_waiting_work("complete"):
                    break
                time.sleep(0.01)
                continue
            won.append(new.ticket_id)
            store.end_run(new.ticket_id, new.run_id, "complete")
    out.put(won)


def test_racing_workers_unblock_dependents_as_they_finish_and_claim_each_ticket_once(store_target, tmp_path):
    # Each dependent waits for two roots that different workers may finish at the same moment:
    # neither finish may leave it blocked (each computes from what the other committed).
    roots = [f"r{i:02d}" for i in range(12)]
    with TicketStore(store_target) as store:
        for i in range(11):
            store.upsert_ticket(_ticket(f"d{i:02d}", tmp_path, [roots[i], roots[i + 1]]))
        for root in roots:
            store.upsert_ticket(_ticket(root, tmp_path))
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_work_all, args=(store_target, out)) for _ in range(4)]
    for p in procs:
        p.start()
    won = [tid for _ in procs for tid in out.get(timeout=120)]
    for p in procs:
        p.join(30)
    assert sorted(won) == sorted([*roots, *(f"d{i:02d}" for i in range(11))])  # each once, none left


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


@pytest.mark.postgres
def test_a_status_write_stalled_mid_transaction_does_not_hold_the_fleets_status_writes(pg_url, tmp_path, monkeypatch):
    """A process stopped inside a status write (SIGSTOP) holds the dependencies' lock: the
    server ends its session once it has been idle in the transaction too long."""
    import time

    import tickets.runnable
    from tickets.errors import StoreError

    monkeypatch.setattr(tickets.runnable, "HOLD_IDLE", "500ms")
    with TicketStore(pg_url) as stalled, TicketStore(pg_url) as other:
        stalled.upsert_ticket(_ticket("a", tmp_path))
        done = threading.Event()
        with pytest.raises(StoreError):
            with stalled._status_write():  # holds the lock, then its client stops answering
                threading.Thread(target=lambda: (other.set_status("a", "discarded"), done.set()), daemon=True).start()
                time.sleep(2.0)
        assert done.wait(30), "the other status write still waits for the stalled one's lock"
        assert other.get_ticket("a").status.value == "discarded"
