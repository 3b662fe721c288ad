"""Ticket claims: one run per ticket across processes, leases, takeover of dead claims, Ctrl-C marks."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import sys

import pytest

from tickets.claims import Claim, claim_is_live, died_note, owner_died, this_host
from tickets.errors import StoreError, TicketError
from tickets.model import Ticket
from tickets.store import SCHEMA_VERSION, TicketStore


def _ticket(tid: str, tmp_path) -> Ticket:
    return Ticket(id=tid, project_id="p", title=f"T {tid}", project_path=str(tmp_path))


@pytest.fixture
def store(store_target, tmp_path):
    with TicketStore(store_target) as s:  # on SQLite and on PostgreSQL
        for i in range(3):
            s.upsert_ticket(_ticket(f"t{i}", tmp_path))
        yield s


def test_claim_creates_the_run_and_marks_the_ticket_running(store):
    run_id = store.claim_new_run("t0", ["pending"])
    assert run_id and store.get_ticket("t0").status.value == "running"
    claim = store.get_claim("t0")
    assert claim.run_id == run_id and claim.pid == os.getpid() and claim.host == this_host()
    assert store.latest_run("t0")["id"] == run_id
    # A second claim (another runner in this or another process) gets nothing.
    assert store.claim_new_run("t0", ["pending", "running"]) is None


def test_status_outside_the_allowed_set_is_not_claimed(store):
    store.set_status("t1", "complete")
    assert store.claim_new_run("t1", ["pending", "failed"]) is None
    assert store.claim_new_run("t1", ["complete"]) is not None


def test_end_run_releases_and_refresh(store):
    run_id = store.claim_new_run("t0", ["pending"], lease_s=60)
    assert run_id is not None
    before = store.get_claim("t0").lease_until
    assert store.refresh_claim("t0", run_id, lease_s=600)
    assert store.get_claim("t0").lease_until > before
    assert not store.refresh_claim("t0", "another-run")
    store.end_run("t0", run_id, "complete")
    assert store.get_claim("t0") is None


def test_a_dead_process_or_an_expired_lease_is_not_live():
    future, past = "9999-01-01T00:00:00+00:00", "2000-01-01T00:00:00+00:00"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    assert claim_is_live(Claim("t", "r", this_host(), os.getpid(), past, future))
    assert not claim_is_live(Claim("t", "r", this_host(), int(dead), past, future))
    assert not claim_is_live(Claim("t", "r", this_host(), os.getpid(), past, past))
    assert claim_is_live(Claim("t", "r", "another-host", 1, past, future))  # only the lease counts there


def test_resume_takes_over_a_dead_claim_but_not_a_live_one(store):
    # Another live process holds it: a resume here is refused with who holds it.
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        run_id = store.claim_new_run("t0", ["pending"], pid=holder.pid)
        assert run_id is not None
        with pytest.raises(TicketError, match=f"pid {holder.pid}"):
            store.claim_for_resume("t0", run_id)
    finally:
        holder.kill()
        holder.wait()
    store.claim_for_resume("t0", run_id)  # the holder is gone: taken over
    assert store.get_claim("t0").pid == os.getpid()


def test_a_reused_pid_is_not_the_claims_owner(store):
    """kill -9 of the owner, then the kernel gives its pid to another process: the claim is dead
    (the owner's start time is recorded with it), and `middle tickets` and `middle run` say so."""
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        run_id = store.claim_new_run("t0", ["pending"], pid=holder.pid)
        assert run_id is not None
        assert claim_is_live(store.get_claim("t0")) and died_note(store.get_claim("t0")) is None
        # A process started later at the same pid: its start time differs from the recorded one.
        with store._write() as conn:
            conn.execute("UPDATE claims SET pid = ? WHERE ticket_id = 't0'", (os.getpid(),))
        claim = store.get_claim("t0")
        assert not claim_is_live(claim) and owner_died(claim)
        assert died_note(claim) == f"its run died (pid {os.getpid()})"
        store.claim_for_resume("t0", run_id)  # taken over at once, not after the lease
    finally:
        holder.kill()
        holder.wait()
    assert not owner_died(store.get_claim("t0"))  # ours now
    # On another host only the lease counts: nothing there can be seen from here.
    assert not owner_died(Claim("t", "r", "another-host", holder.pid, "", "", None))


def test_interrupt_marks_the_run_and_its_running_turn(store):
    run_id = store.claim_new_run("t0", ["pending"])
    assert run_id is not None
    store.start_turn(run_id, 1, "prompt", "sess", False)
    store.end_run("t0", run_id, "interrupted", "interrupted by the user")
    assert store.get_run(run_id)["status"] == "interrupted"
    assert store.get_turn(run_id, 1)["status"] == "interrupted"
    store.start_turn(run_id, 1, "prompt", "sess", False)  # a resume retries the interrupted turn


def _race(path: str, ticket_id: str, barrier, results) -> None:
    with TicketStore(path) as s:
        barrier.wait()
        results.put(s.claim_new_run(ticket_id, ["pending"]))


def test_processes_racing_for_one_ticket_get_one_claim(store_target, tmp_path):
    path = store_target  # SQLite: BEGIN IMMEDIATE; PostgreSQL: FOR UPDATE SKIP LOCKED
    with TicketStore(path) as s:
        s.upsert_ticket(_ticket("t0", tmp_path))
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(path), "t0", barrier, results)) for _ in range(8)]
    for p in procs:
        p.start()
    got = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
    assert len([r for r in got if r]) == 1
    with TicketStore(path) as s:
        assert len(s.list_runs("t0")) == 1


def _hold(path: str, ticket_id: str, run_id: str, barrier, results) -> None:
    with TicketStore(path) as s:
        barrier.wait()
        results.put(s.hold(ticket_id, run_id, ["complete"]))  # kept until this process ends


def test_processes_racing_to_hold_a_complete_ticket_get_one_hold_and_keep_its_status(store_target, tmp_path):
    path = store_target
    with TicketStore(path) as s:
        s.upsert_ticket(_ticket("t0", tmp_path))
        run_id = s.claim_new_run("t0", ["pending"])
        assert run_id is not None
        s.end_run("t0", run_id, "complete", None)
        assert s.hold("t0", run_id, ["pending"]) is False  # not in the statuses asked for
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_hold, args=(str(path), "t0", run_id, barrier, results)) for _ in range(4)]
    for p in procs:
        p.start()
    got = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
    assert sorted(got) == [False, False, False, True]
    with TicketStore(path) as s:
        assert s.get_ticket("t0").status.value == "complete"  # a hold changes no status
        assert s.hold("t0", run_id, ["complete"])  # its owner exited: not live any more
        assert s.claim_new_run("t0", ["complete"]) is None  # nothing else takes it while held
        s.release_hold("t0", run_id)
        assert s.get_claim("t0") is None


def test_schema_1_database_is_migrated(tmp_path):
    path = tmp_path / "old.db"
    with TicketStore(path) as s:
        s.upsert_ticket(_ticket("t0", tmp_path))
        run_id = s.claim_new_run("t0", ["pending"])
        assert run_id is not None
        s.start_turn(run_id, 1, "p", "s", False)
    conn = sqlite3.connect(path)  # make it look like a schema-1 file: no claims, old turns CHECK
    conn.executescript("""
        DROP TABLE claims; DELETE FROM schema_version; INSERT INTO schema_version VALUES (1);
        ALTER TABLE turns RENAME TO t2;
        CREATE TABLE turns AS SELECT * FROM t2; DROP TABLE t2;
    """)
    conn.close()
    with TicketStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION
        assert s.get_turn(run_id, 1)["prompt"] == "p"
        s.end_run("t0", run_id, "interrupted", "x")
        assert s.get_turn(run_id, 1)["status"] == "interrupted"


def test_schema_4_claims_get_the_owner_start_column(tmp_path):
    path = tmp_path / "v4.db"
    with TicketStore(path) as s:
        s.upsert_ticket(_ticket("t0", tmp_path))
        s.claim_new_run("t0", ["pending"])
    conn = sqlite3.connect(path)  # a schema-4 file: its claims have no owner start
    conn.executescript("""
        CREATE TABLE c4 (ticket_id TEXT PRIMARY KEY REFERENCES tickets(id) ON DELETE CASCADE,
            run_id TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, claimed_at TEXT NOT NULL,
            lease_until TEXT NOT NULL);
        INSERT INTO c4 SELECT ticket_id, run_id, host, pid, claimed_at, lease_until FROM claims;
        DROP TABLE claims; ALTER TABLE c4 RENAME TO claims;
        DELETE FROM schema_version; INSERT INTO schema_version VALUES (4);
    """)
    conn.close()
    with TicketStore(path, readonly=True) as s:  # read as it is: a live owner without a start time
        assert s.get_claim("t0").owner_start is None and claim_is_live(s.get_claim("t0"))
    with TicketStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION
        assert s.get_claim("t0").owner_start is None and claim_is_live(s.get_claim("t0"))
        run_id = s.latest_run("t0")["id"]
        s.claim_for_resume("t0", run_id)
        assert s.get_claim("t0").owner_start  # recorded from now on


def test_readonly_store_reads_and_refuses_writes_and_creates_nothing(tmp_path):
    with pytest.raises(TicketError, match="`middle run` creates it"):
        TicketStore(tmp_path / "missing.db", readonly=True)
    assert not (tmp_path / "missing.db").exists()
    with TicketStore(tmp_path / "t.db") as s:
        s.upsert_ticket(_ticket("t0", tmp_path))
    with TicketStore(tmp_path / "t.db", readonly=True) as s:
        assert [t.id for t in s.list_tickets()] == ["t0"]
        with pytest.raises(StoreError, match="read-only"):
            s.set_status("t0", "complete")


def test_a_database_overwritten_in_the_middle_is_a_store_error_naming_it(tmp_path):
    path = tmp_path / "t.db"
    with TicketStore(path) as s:
        for i in range(50):
            s.upsert_ticket(_ticket(f"t{i}", tmp_path).replace(description="x" * 2000))
    with open(path, "r+b") as fh:  # keep the header, trash the pages after it
        fh.seek(4096)
        fh.write(b"\xff" * 16384)
    with pytest.raises(StoreError) as err:
        with TicketStore(path) as s:
            s.list_tickets()
    assert str(path) in str(err.value) and "Move it away" in str(err.value)
