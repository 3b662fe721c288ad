"""Every `middle sync` looks for the runs whose end owes something (runs.hooks_due: end hooks a
kill skipped; runs.pr_due: a pull request's update or opening): partial indexes that hold only
those rows (schema 19, tickets/end_hooks.py DUE_INDEXES) find them without reading every run, on
SQLite (its query plan names them) and PostgreSQL (the indexes exist); a version 18 store gains
them, its rows kept."""

from __future__ import annotations

import sqlite3

from tickets.model import Ticket
from tickets.store import SCHEMA_VERSION, TicketStore

INDEXES = {"runs_hooks_due", "runs_pr_due"}


def _fill(store: TicketStore) -> tuple[str, str]:
    """Ten ended runs owing nothing, one complete run owing its hooks and its pull request's update."""
    for i in range(10):
        store.upsert_ticket(Ticket(id=f"done{i}", project_id="p", title="t", project_path="/p"))
        run_id = store.create_run(f"done{i}")
        store.end_run(f"done{i}", run_id, "complete")
        store.clear_hooks_due(run_id)
    store.upsert_ticket(Ticket(id="owing", project_id="p", title="t", project_path="/p"))
    run_id = store.create_run("owing")
    store.end_run("owing", run_id, "complete", pr_due="update")
    return "owing", run_id


def _plan(path, sql: str) -> str:
    conn = sqlite3.connect(path)
    try:
        return " ".join(str(row) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
    finally:
        conn.close()


def test_the_due_runs_are_found_by_their_indexes(store_target):
    with TicketStore(store_target) as store:
        ticket_id, run_id = _fill(store)
        assert [(t, r) for t, r, _ in store.hooks_due()] == [(ticket_id, run_id)]
        assert store.pr_due_tickets() == [ticket_id]
        store.clear_hooks_due(run_id)
        store.set_run_fields(run_id, pr_due=None)
        assert store.hooks_due() == [] and store.pr_due_tickets() == []
        if store._db.dialect == "postgres":
            names = {r[0] for r in store._read("SELECT indexname FROM pg_indexes WHERE tablename = 'runs'")}
            assert INDEXES <= names, names
    if not store_target.startswith("postgres"):
        hooks = _plan(store_target, "SELECT id FROM runs WHERE hooks_due IS NOT NULL ORDER BY ended_at")
        prs = _plan(store_target, "SELECT ticket_id FROM runs WHERE pr_due IS NOT NULL AND status = 'complete'")
        assert "runs_hooks_due" in hooks and "runs_pr_due" in prs, (hooks, prs)


def test_a_version_18_store_gains_the_indexes(tmp_path):
    path = tmp_path / "t.db"
    with TicketStore(path) as store:
        ticket_id, run_id = _fill(store)
    conn = sqlite3.connect(path)
    for name in INDEXES:
        conn.execute(f"DROP INDEX {name}")
    conn.execute("UPDATE schema_version SET version = 18")
    conn.commit()
    assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name IN ('runs_hooks_due', 'runs_pr_due')").fetchone()
    conn.close()
    with TicketStore(path) as store:
        assert store.schema_version() == SCHEMA_VERSION == 19
        assert [(t, r) for t, r, _ in store.hooks_due()] == [(ticket_id, run_id)]
        assert store.pr_due_tickets() == [ticket_id]
    conn = sqlite3.connect(path)
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")} >= INDEXES
    conn.close()
