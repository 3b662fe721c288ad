"""Run events become visible in id order, so a reader that tails them by id misses none.

`middle log --follow`, the SSE stream and a run's `feedback_seen` all read "events after the
last id I saw". On PostgreSQL a sequence hands out ids at insert time: without ordering, a
transaction that drew id N and commits after another's N+1 would be skipped by a reader that
had already seen N+1 (feedback sent at that moment would never reach the agent).
"""

from __future__ import annotations

import multiprocessing as mp
import threading
from pathlib import Path

import pytest

from tickets.events import insert_event
from tickets.model import Ticket, utc_now
from tickets.store import TicketStore


def _send_feedback(target: str, run_id: str, ready, go) -> None:  # another process: `middle feedback`
    with TicketStore(target) as store:
        ready.set()
        if go.wait(60):
            store.add_feedback("t1", run_id, "also handle empty input")


def test_an_event_committed_later_never_hides_behind_a_higher_id_already_seen(store_target, tmp_path: Path):
    with TicketStore(store_target) as setup:
        setup.upsert_ticket(Ticket(id="t1", project_id="p", title="T", project_path=str(tmp_path)))
        run_id = setup.claim_new_run("t1", ["pending"])
        assert run_id is not None
    first, reader = TicketStore(store_target), TicketStore(store_target)
    inserted, release = threading.Event(), threading.Event()
    ids: dict[str, int] = {}

    def slow_writer() -> None:  # draws its id, then is slow to commit (a busy machine)
        with first._db.write() as conn:
            ids["slow"] = insert_event(first._db, conn, run_id, "t1", "note", "{}", utc_now())
            inserted.set()
            release.wait(30)

    spawn = mp.get_context("spawn")
    ready, go = spawn.Event(), spawn.Event()
    fast = spawn.Process(target=_send_feedback, args=(store_target, run_id, ready, go))
    fast.start()
    try:
        assert ready.wait(60)  # its store open before the slow writer takes the write lock
        slow = threading.Thread(target=slow_writer)
        slow.start()
        assert inserted.wait(30)
        go.set()
        fast.join(1.0)  # without ordering, the feedback commits here with the higher id
        seen = [e["id"] for e in reader.list_events(run_id=run_id)]
        release.set()
        slow.join(30)
        fast.join(30)
        assert not slow.is_alive() and not fast.is_alive()
        after = [e["id"] for e in reader.list_events(run_id=run_id)]
        # Whatever the reader saw then, it saw every event below the highest id it saw.
        high = max(seen, default=0)
        assert [i for i in after if i <= high] == seen
        assert fast.exitcode == 0
        feedback = reader.feedback(run_id)[-1]["id"]
        assert ids["slow"] < feedback  # committed first, numbered first
    finally:
        release.set()
        go.set()
        fast.join(30)
        for store in (first, reader):
            store.close()


def _note(target: str, run_id: str, ticket_id: str, ready, go, done) -> None:  # another worker's run
    with TicketStore(target) as store:
        ready.set()
        if go.wait(60):
            store.add_event(run_id, ticket_id, "note", {"text": "step"})
            done.set()


@pytest.mark.postgres
def test_runs_of_other_tickets_write_events_while_one_tickets_insert_waits_to_commit(pg_url, tmp_path: Path):
    """No database-wide lock: the order is kept per ticket, so a fleet's runs write side by side."""
    with TicketStore(pg_url) as setup:
        for tid in ("t1", "t2"):
            setup.upsert_ticket(Ticket(id=tid, project_id="p", title=tid, project_path=str(tmp_path)))
        runs = {tid: str(setup.claim_new_run(tid, ["pending"])) for tid in ("t1", "t2")}
    slow = TicketStore(pg_url)
    spawn = mp.get_context("spawn")
    go = spawn.Event()
    flags = {tid: (spawn.Event(), spawn.Event()) for tid in ("t1", "t2")}  # (ready, done)
    writers = [spawn.Process(target=_note, args=(pg_url, runs[tid], tid, ready, go, done))
               for tid, (ready, done) in flags.items()]
    for w in writers:
        w.start()
    try:
        assert all(ready.wait(60) for ready, _ in flags.values())  # stores open first
        with slow._db.write() as conn:  # t1's event drawn, its commit slow
            insert_event(slow._db, conn, runs["t1"], "t1", "note", "{}", utc_now())
            go.set()
            assert flags["t2"][1].wait(60)  # another ticket's event committed meanwhile
            assert not flags["t1"][1].wait(2)  # the same ticket's next event waits for this one
        assert flags["t1"][1].wait(60)
    finally:
        go.set()
        for w in writers:
            w.join(30)
        slow.close()
