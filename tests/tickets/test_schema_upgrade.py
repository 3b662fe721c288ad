"""A PostgreSQL store's schema upgraded while workers claim and end runs: no deadlock, no error
on either side, and the workers carry on against the new schema."""

from __future__ import annotations

import threading

import psycopg
import pytest

from tickets.model import Ticket
from tickets.store import SCHEMA_VERSION, TicketStore


def _downgrade(url: str) -> None:
    """The store as schema 12 left it (no deps_met), for the next process that opens it to upgrade."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP INDEX tickets_runnable; DROP INDEX tickets_runnable_complete;"
                     " ALTER TABLE tickets DROP COLUMN deps_met;"
                     " DELETE FROM schema_version; INSERT INTO schema_version VALUES (12)")


@pytest.mark.postgres
def test_a_schema_upgrade_while_workers_claim_neither_deadlocks_nor_fails(pg_url, tmp_path):
    ids = [f"t{i:03d}" for i in range(300)]
    with TicketStore(pg_url) as setup:
        for tid in ids:
            setup.upsert_ticket(Ticket(id=tid, project_id="p", title=tid, project_path=str(tmp_path)))
    workers = [TicketStore(pg_url) for _ in range(4)]  # opened at the current schema: no upgrade of theirs
    errors: list[BaseException] = []
    won: list[str] = []
    stop = threading.Event()

    def work(store: TicketStore, mine: list[str]) -> None:
        # What a worker's transactions touch at any schema: tickets, runs, claims, turns, events.
        try:
            for tid in mine:
                if stop.is_set():
                    return
                run = store.claim_new_run(tid, ["pending"])
                if run is None:
                    continue
                won.append(tid)
                store.start_turn(run, 1, "go", None, False)
                store.add_event(run, tid, "note", {"text": "working"})
                store.end_run(tid, run, "failed", "gave up")  # (failed: no dependent's state to keep)
        except BaseException as exc:  # noqa: BLE001 - any failure of a worker is the finding
            errors.append(exc)

    try:
        _downgrade(pg_url)
        threads = [threading.Thread(target=work, args=(store, ids[k::4])) for k, store in enumerate(workers)]
        for t in threads:
            t.start()
        with TicketStore(pg_url) as upgrading:  # upgrades while they work
            assert upgrading.schema_version() == SCHEMA_VERSION
        for t in threads:
            t.join(120)
        stop.set()
    finally:
        for store in workers:
            store.close()
    assert not errors, errors
    assert sorted(won) == ids  # every ticket claimed once, none lost to an aborted transaction
    with TicketStore(pg_url) as store:
        assert {t.status.value for t in store.list_tickets()} == {"failed"}
