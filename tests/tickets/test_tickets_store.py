"""Tests for the SQLite ticket store: tickets, runs, turns, memory docs, persistence, concurrency."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from tickets.errors import StoreError, TicketError
from tickets.model import Ticket, TicketStatus
from tickets.store import SCHEMA_VERSION, TicketStore


def ticket(tid="t1", **overrides):
    data = {"id": tid, "project_id": "proj", "title": f"Ticket {tid}", "project_path": "/tmp/proj"}
    data.update(overrides)
    return Ticket(**data)


@pytest.fixture
def store(store_target):
    s = TicketStore(store_target)  # every test that takes `store` runs on SQLite and PostgreSQL
    yield s
    s.close()


def finish_ok(store, run_id, turn_no, response="ok", cost=0.5, **kw):
    args = dict(response=response, is_error=False, error=None, cost_usd=cost, duration_ms=10,
                usage={"input_tokens": 3}, num_turns=1)
    args.update(kw)
    store.finish_turn(run_id, turn_no, **args)


# -- the database file ---------------------------------------------------------------------


def test_creates_parent_dirs_and_uses_wal(tmp_path):
    path = tmp_path / "a" / "b" / "t.db"
    with TicketStore(path) as s:
        assert s.path == path.resolve()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_sqlite_connection_pragmas(tmp_path):
    with TicketStore(tmp_path / "t.sqlite") as store:
        conn = store._db._conn  # the pragmas are per connection, so read them from the store's own
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000


def test_schema_version_is_recorded_once(tmp_path):
    path = tmp_path / "t.db"
    TicketStore(path).close()
    with TicketStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == 1
    conn.close()


def test_a_version_4_store_gains_the_merge_record(tmp_path):
    """Schema 4 -> 5: runs get premerge_commit (the base before a merge), kept rows intact."""
    path = tmp_path / "t.db"
    with TicketStore(path) as s:
        s.upsert_ticket(Ticket(id="t1", project_id="p", title="T", project_path="/tmp"))
        run_id = s.create_run("t1")
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE runs DROP COLUMN premerge_commit")
    conn.execute("UPDATE schema_version SET version = 4")
    conn.commit()
    conn.close()
    with TicketStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION
        assert s.latest_run("t1")["premerge_commit"] is None
        s.set_run_fields(run_id, premerge_commit="abc", merge_commit="def")
        assert s.latest_run("t1")["premerge_commit"] == "abc"


def test_a_version_6_store_gains_the_memory_curation_tables(tmp_path):
    """Schema 6 -> 7: memory_state and memory_changes (tickets/curation.py), and memory_docs.run_id."""
    path = tmp_path / "t.db"
    with TicketStore(path) as s:
        s.upsert_ticket(Ticket(id="t1", project_id="p", title="T", project_path="/tmp"))
        s.add_memory_doc("t1", "p", "Ticket: T. Done.")
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE memory_state")
    conn.execute("DROP TABLE memory_changes")
    conn.execute("ALTER TABLE memory_docs DROP COLUMN run_id")
    conn.execute("UPDATE schema_version SET version = 6")
    conn.commit()
    conn.close()
    with TicketStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION
        assert s.doc_sources("p")["Ticket: T. Done."][0]["run_id"] is None
        assert s.memory_state("p") == {} and s.memory_changes("p") == []


def test_a_version_13_store_gains_memory_validity(tmp_path):
    """Schema 13 -> 14: memory_state.valid_until, the curation kept."""
    path = tmp_path / "t.db"
    state = {"doc_id": "ab" * 32, "doc": "a rule", "pinned": True, "superseded_by": None,
             "origin": {"kind": "hand"}, "added_by": "me", "added_at": "2026-01-01T00:00:00+00:00"}
    with TicketStore(path) as s:
        s.record_memory_change("p", "pin", state["doc_id"], who="me", put=[state])
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE memory_state DROP COLUMN valid_until")
    conn.execute("UPDATE schema_version SET version = 13")
    conn.commit()
    conn.close()
    with TicketStore(path, readonly=True) as s:  # not migrated yet: read without the column
        assert s.memory_state("p")[state["doc_id"]]["valid_until"] is None
    with TicketStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION
        assert s.memory_state("p")[state["doc_id"]] == {**state, "valid_until": None}
        s.record_memory_change("p", "expire", state["doc_id"], who="me",
                               put=[{**state, "valid_until": "2026-02-01T00:00:00+00:00"}])
        assert s.memory_state("p")[state["doc_id"]]["valid_until"] == "2026-02-01T00:00:00+00:00"


def test_a_version_14_store_gains_the_turns_coding_agent(tmp_path):
    """Schema 14 -> 15: turns.coding_agent (the kind whose session a turn ran in); older turns: NULL."""
    path = tmp_path / "t.db"
    with TicketStore(path) as s:
        s.upsert_ticket(Ticket(id="t1", project_id="p", title="T", project_path="/tmp"))
        run_id = s.create_run("t1")
        s.start_turn(run_id, 1, "do it", "s1", False)
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE turns DROP COLUMN coding_agent")
    conn.execute("UPDATE schema_version SET version = 14")
    conn.commit()
    conn.close()
    with TicketStore(path, readonly=True) as s:  # not migrated yet: read without the column
        assert [t["coding_agent"] for t in s.list_turns(ticket_id="t1")] == [None]
        assert s.get_turn(run_id, 1)["session_id"] == "s1"
    with TicketStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION
        assert s.get_turn(run_id, 1)["coding_agent"] is None
        s.start_turn(run_id, 2, "again", "s2", False, coding_agent="codex")
        assert [t["coding_agent"] for t in s.list_turns(run_id=run_id)] == [None, "codex"]


def test_a_version_5_store_gains_the_pull_request_record(tmp_path):
    """Schema 5 -> 6: runs get pr_url and pr_state (`middle pr`), kept rows intact."""
    path = tmp_path / "t.db"
    with TicketStore(path) as s:
        s.upsert_ticket(Ticket(id="t1", project_id="p", title="T", project_path="/tmp"))
        run_id = s.create_run("t1")
        s.set_run_fields(run_id, branch="middle/t1")
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE runs DROP COLUMN pr_url")
    conn.execute("ALTER TABLE runs DROP COLUMN pr_state")
    conn.execute("UPDATE schema_version SET version = 5")
    conn.commit()
    conn.close()
    with TicketStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION
        run = s.latest_run("t1")
        assert run["pr_url"] is None and run["pr_state"] is None and run["branch"] == "middle/t1"
        s.set_run_fields(run_id, pr_url="https://github.example/me/app/pull/2", pr_state="open")
        assert s.latest_run("t1")["pr_url"].endswith("/pull/2")


def test_a_version_6_store_gains_pending_memory_docs_and_keeps_its_docs_indexed(tmp_path):
    """Schema 6 -> 7: memory_docs.index_pending; docs recorded before it count as indexed."""
    path = tmp_path / "t.db"
    with TicketStore(path) as s:
        s.upsert_ticket(Ticket(id="t1", project_id="p", title="T", project_path="/tmp"))
        s.add_memory_doc("t1", "p", "Ticket: T. done.")
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE memory_docs DROP COLUMN index_pending")
    conn.execute("UPDATE schema_version SET version = 6")
    conn.commit()
    conn.close()
    with TicketStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION
        assert s.memory_docs("t1") == ["Ticket: T. done."] and s.pending_memory_docs() == []
        s.add_memory_doc("t1", "p", "Ticket: T. again.", pending=True)
        assert s.pending_memory_docs("p") == [("t1", "p", "Ticket: T. again.")]
        s.memory_doc_indexed("t1", "Ticket: T. again.")
        assert s.pending_memory_docs() == []


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "t.db"
    TicketStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="upgrade middle-agent"):
        TicketStore(path)


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError) as info:
        TicketStore(path)
    assert str(path) in str(info.value)


def test_data_persists_across_reopen(tmp_path):
    path = tmp_path / "t.db"
    with TicketStore(path) as s:
        s.upsert_ticket(ticket("t1", fields={"labels": ["x"]}))
        s.set_status("t1", TicketStatus.RUNNING)
        run = s.create_run("t1")
        s.start_turn(run, 1, "p1", "sess", False)
        finish_ok(s, run, 1)
        s.add_memory_doc("t1", "proj", "Ticket: doc")
    with TicketStore(path) as s:
        t = s.get_ticket("t1")
        assert t.status is TicketStatus.RUNNING and t.fields == {"labels": ["x"]}
        assert s.latest_run("t1")["run_id"] == run
        assert s.get_turn(run, 1)["status"] == "done"
        assert s.memory_docs("t1") == ["Ticket: doc"]


# -- tickets -------------------------------------------------------------------------------


def test_upsert_inserts_and_returns_the_stored_ticket(store):
    t = ticket("t1", description="desc", source="/x/t1.md", fields={"a": 1})
    stored = store.upsert_ticket(t)
    assert stored == t
    assert store.get_ticket("t1") == t


def test_upsert_updates_content_but_keeps_status(store):
    old_stamp = "2020-01-01T00:00:00+00:00"
    before = store.upsert_ticket(ticket("t1", status=TicketStatus.COMPLETE, status_reason="done well",
                                        created_at=old_stamp, updated_at=old_stamp))
    updated = store.upsert_ticket(ticket("t1", title="New title", description="d2", project_path="/srv/p",
                                         fields={"k": "v"}, status=TicketStatus.PENDING))
    assert updated.title == "New title" and updated.description == "d2"
    assert updated.project_path == "/srv/p" and updated.fields == {"k": "v"}
    assert updated.status is TicketStatus.COMPLETE and updated.status_reason == "done well"
    assert updated.created_at == before.created_at
    assert updated.updated_at > before.updated_at


def test_upsert_without_changes_keeps_updated_at(store):
    first = store.upsert_ticket(ticket("t1"))
    again = store.upsert_ticket(ticket("t1"))
    assert again.updated_at == first.updated_at


def test_upsert_of_a_new_ticket_keeps_its_given_status(store):
    stored = store.upsert_ticket(ticket("t1", status=TicketStatus.FAILED, status_reason="why"))
    assert stored.status is TicketStatus.FAILED and stored.status_reason == "why"


def test_get_missing_ticket_says_how_to_list_them(store):
    with pytest.raises(TicketError, match=r"no ticket 'nope': list them with `middle tickets` \(a new "
                                          r"ticket file is taken in by `middle run` or `middle sync`\)"):
        store.get_ticket("nope")


def test_list_tickets_orders_by_created_at_then_id_and_filters(store):
    store.upsert_ticket(ticket("b", created_at="2025-01-01T00:00:00Z"))
    store.upsert_ticket(ticket("c", created_at="2024-01-01T00:00:00Z", project_id="other"))
    store.upsert_ticket(ticket("a", created_at="2025-01-01T00:00:00Z"))
    assert [t.id for t in store.list_tickets()] == ["c", "a", "b"]
    store.set_status("a", "failed")
    assert [t.id for t in store.list_tickets(status=TicketStatus.FAILED)] == ["a"]
    assert [t.id for t in store.list_tickets(status="pending")] == ["c", "b"]
    assert [t.id for t in store.list_tickets(project_id="other")] == ["c"]
    assert store.list_tickets(status="pending", project_id="nobody") == []
    with pytest.raises(TicketError, match="unknown ticket status 'done': use one of pending, running"):
        store.list_tickets(status="done")


def test_set_status(store):
    store.upsert_ticket(ticket("t1"))
    store.set_status("t1", TicketStatus.FAILED, "over budget")
    t = store.get_ticket("t1")
    assert (t.status, t.status_reason) == (TicketStatus.FAILED, "over budget")
    store.set_status("t1", "running")
    t = store.get_ticket("t1")
    assert (t.status, t.status_reason) == (TicketStatus.RUNNING, None)
    with pytest.raises(TicketError, match="no ticket 'ghost'"):
        store.set_status("ghost", TicketStatus.RUNNING)
    with pytest.raises(ValueError):
        store.set_status("t1", "exploded")


# -- runs ----------------------------------------------------------------------------------


def test_create_and_get_run(store):
    store.upsert_ticket(ticket("t1"))
    run_id = store.create_run("t1")
    assert uuid.UUID(hex=run_id).version == 4 and run_id == uuid.UUID(hex=run_id).hex
    run = store.get_run(run_id)
    assert run["run_id"] == run["id"] == run_id and run["ticket_id"] == "t1"
    assert run["status"] == "running" and run["ended_at"] is None
    assert run["total_cost_usd"] == 0
    datetime.fromisoformat(run["started_at"])


def test_run_for_unknown_ticket_or_unknown_run(store):
    with pytest.raises(TicketError, match="no ticket 'ghost'"):
        store.create_run("ghost")
    with pytest.raises(TicketError, match="no run 'r0'"):
        store.get_run("r0")
    with pytest.raises(TicketError, match="no run 'r0'"):
        store.set_run_fields("r0", plan_prompt="x")


def test_latest_and_list_runs(store):
    store.upsert_ticket(ticket("t1"))
    store.upsert_ticket(ticket("t2"))
    assert store.latest_run("t1") is None and store.list_runs("t1") == []
    runs = [store.create_run("t1") for _ in range(5)]
    store.create_run("t2")
    assert [r["run_id"] for r in store.list_runs("t1")] == runs
    assert store.latest_run("t1")["run_id"] == runs[-1]


@pytest.mark.parametrize("status", ["complete", "failed", "interrupted"])
def test_end_run_records_status_reason_and_end(store, status):
    store.upsert_ticket(ticket("t1"))
    run_id = store.create_run("t1")
    assert store.end_run("t1", run_id, status, "because")
    run = store.get_run(run_id)
    assert (run["status"], run["reason"]) == (status, "because")
    assert run["ended_at"] is not None
    assert not store.end_run("t1", run_id, "failed")  # it already ended: nothing changes
    assert store.get_run(run_id)["status"] == status


def test_end_run_refuses_unknown_status(store):
    store.upsert_ticket(ticket("t1"))
    run_id = store.create_run("t1")
    with pytest.raises(ValueError, match="pending"):
        store.end_run("t1", run_id, "pending")


def test_set_run_fields(store):
    store.upsert_ticket(ticket("t1"))
    run_id = store.create_run("t1")
    store.set_run_fields(run_id, plan_memories="Memories invoked:\nm", plan_prompt="do x",
                         total_cost_usd=1.25, ended_at="2025-01-01T00:00:00+00:00")
    run = store.get_run(run_id)
    assert run["plan_memories"] == "Memories invoked:\nm" and run["plan_prompt"] == "do x"
    assert run["total_cost_usd"] == 1.25 and run["ended_at"] == "2025-01-01T00:00:00+00:00"
    with pytest.raises(ValueError, match="status"):
        store.set_run_fields(run_id, status="complete")
    assert store.get_run(run_id)["status"] == "running"


# -- turns ---------------------------------------------------------------------------------


@pytest.fixture
def run_id(store):
    store.upsert_ticket(ticket("t1"))
    return store.create_run("t1")


def test_turn_lifecycle(store, run_id):
    assert store.get_turn(run_id, 1) is None
    store.start_turn(run_id, 1, "first prompt", "sess-1", False)
    turn = store.get_turn(run_id, 1)
    assert turn["status"] == "running" and turn["prompt"] == "first prompt"
    assert turn["session_id"] == "sess-1" and turn["resume"] is False
    assert turn["response"] is None and turn["decision"] is None and turn["ended_at"] is None
    store.finish_turn(run_id, 1, response="did it", is_error=False, error=None, cost_usd=0.25,
                      duration_ms=1200, usage={"input_tokens": 10, "output_tokens": 5}, num_turns=3)
    store.set_turn_assessment(run_id, 1, "Memories invoked:\nold work",
                              {"complete": False, "summary": "", "next_prompt": "now test"})
    turn = store.get_turn(run_id, 1)
    assert turn["status"] == "done" and turn["response"] == "did it"
    assert turn["cost_usd"] == 0.25 and turn["duration_ms"] == 1200 and turn["num_turns"] == 3
    assert turn["usage"] == {"input_tokens": 10, "output_tokens": 5}
    assert turn["memories_invoked"] == "Memories invoked:\nold work"
    assert turn["decision"] == {"complete": False, "summary": "", "next_prompt": "now test"}
    assert turn["is_error"] is False and turn["error"] is None and turn["ended_at"] is not None
    expected = {"run_id", "turn_no", "prompt", "response", "memories_invoked", "decision", "session_id",
                "resume", "cost_usd", "duration_ms", "usage", "error", "status", "started_at", "ended_at"}
    assert expected <= set(turn)


def test_failed_turn_has_error_status(store, run_id):
    store.start_turn(run_id, 1, "p", "s", False)
    store.finish_turn(run_id, 1, response="", is_error=True, error="API error 500", cost_usd=0,
                      duration_ms=5, usage={}, num_turns=0)
    turn = store.get_turn(run_id, 1)
    assert turn["status"] == "error" and turn["is_error"] is True and turn["error"] == "API error 500"


@pytest.mark.parametrize("first_outcome", ["running", "error"])
def test_running_or_error_turn_is_overwritten_on_retry(store, run_id, first_outcome):
    store.start_turn(run_id, 1, "old prompt", "old-sess", False)
    if first_outcome == "error":
        store.finish_turn(run_id, 1, response="", is_error=True, error="boom", cost_usd=0.1,
                          duration_ms=1, usage={}, num_turns=0)
    store.start_turn(run_id, 1, "new prompt", "new-sess", True)
    turn = store.get_turn(run_id, 1)
    assert turn["status"] == "running" and turn["prompt"] == "new prompt"
    assert turn["session_id"] == "new-sess" and turn["resume"] is True
    assert turn["error"] is None and turn["cost_usd"] == 0
    assert len(store.list_turns(run_id=run_id)) == 1


def test_completed_turn_is_never_re_run(store, run_id):
    store.start_turn(run_id, 1, "p", "s", False)
    finish_ok(store, run_id, 1, response="the answer")
    with pytest.raises(ValueError, match="never re-run"):
        store.start_turn(run_id, 1, "other prompt", "s2", True)
    with pytest.raises(ValueError, match="already completed"):
        finish_ok(store, run_id, 1, response="overwritten")
    turn = store.get_turn(run_id, 1)
    assert (turn["prompt"], turn["response"], turn["status"]) == ("p", "the answer", "done")


def test_turn_argument_errors(store, run_id):
    with pytest.raises(ValueError, match="start at 1"):
        store.start_turn(run_id, 0, "p", "s", False)
    with pytest.raises(TicketError, match="no run 'nope'"):
        store.start_turn("nope", 1, "p", "s", False)
    with pytest.raises(ValueError, match="never started"):
        finish_ok(store, run_id, 7)
    with pytest.raises(ValueError, match="never started"):
        store.set_turn_assessment(run_id, 7, "", {})


def test_list_turns_by_run_and_by_ticket(store):
    store.upsert_ticket(ticket("t1"))
    store.upsert_ticket(ticket("t2"))
    r1 = store.create_run("t1")
    r2 = store.create_run("t1")
    other = store.create_run("t2")
    for run, n in ((r2, 2), (r1, 2), (r2, 1), (r1, 1), (other, 1)):  # inserted out of order
        store.start_turn(run, n, f"{run[:4]}-{n}", "s", n > 1)
    assert [t["turn_no"] for t in store.list_turns(run_id=r1)] == [1, 2]
    by_ticket = [(t["run_id"], t["turn_no"]) for t in store.list_turns(ticket_id="t1")]
    assert by_ticket == [(r1, 1), (r1, 2), (r2, 1), (r2, 2)]
    assert [t["run_id"] for t in store.list_turns(ticket_id="t2")] == [other]
    assert store.list_turns(run_id=r1, ticket_id="t2") == []
    assert len(store.list_turns()) == 5


def test_total_cost_sums_the_runs_turns(store, run_id):
    assert store.total_cost(run_id) == 0.0
    for n, cost in ((1, 0.25), (2, 0.5)):
        store.start_turn(run_id, n, "p", "s", n > 1)
        finish_ok(store, run_id, n, cost=cost)
    store.start_turn(run_id, 3, "p", "s", True)  # still running: no cost yet
    assert store.total_cost(run_id) == pytest.approx(0.75)


# -- memory docs ---------------------------------------------------------------------------


def test_memory_docs_round_trip(store):
    store.upsert_ticket(ticket("t1"))
    store.upsert_ticket(ticket("t2"))
    assert store.memory_docs("t1") == []
    store.add_memory_doc("t1", "proj", "Ticket: A. desc. summary ü")
    store.add_memory_doc("t1", "proj", "Ticket: A. second")
    store.add_memory_doc("t2", "proj", "Ticket: B. other")
    assert store.memory_docs("t1") == ["Ticket: A. desc. summary ü", "Ticket: A. second"]
    assert store.mark_memory_docs_deleted("t1") == 2
    assert store.memory_docs("t1") == []
    assert store.memory_docs("t1", include_deleted=True) == ["Ticket: A. desc. summary ü", "Ticket: A. second"]
    assert store.memory_docs("t2") == ["Ticket: B. other"]
    assert store.mark_memory_docs_deleted("t1") == 0


def test_same_doc_indexed_twice_is_stored_once_until_deleted(store):
    store.upsert_ticket(ticket("t1"))
    store.add_memory_doc("t1", "proj", "doc")
    store.add_memory_doc("t1", "proj", "doc")  # index node re-run after a resume
    assert store.memory_docs("t1") == ["doc"]
    store.mark_memory_docs_deleted("t1")
    store.add_memory_doc("t1", "proj", "doc")  # indexed again after a revert and re-run
    assert store.memory_docs("t1") == ["doc"]
    assert store.memory_docs("t1", include_deleted=True) == ["doc", "doc"]


def test_memory_doc_for_unknown_ticket(store):
    with pytest.raises(TicketError, match="no ticket 'ghost'"):
        store.add_memory_doc("ghost", "proj", "doc")


# -- concurrency ---------------------------------------------------------------------------


def run_threads(target, n):
    errors: list[BaseException] = []

    def wrapped(i):
        try:
            target(i)
        except BaseException as err:  # collected so a failure in a thread fails the test
            errors.append(err)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_concurrent_writes_from_threads(store):
    store.upsert_ticket(ticket("shared"))

    def work(i):
        store.upsert_ticket(ticket(f"t{i}"))
        for _ in range(5):
            run = store.create_run("shared")
            for n in (1, 2):
                store.start_turn(run, n, f"p{i}", f"s{i}", n > 1)
                finish_ok(store, run, n, cost=0.01)
            store.add_memory_doc(f"t{i}", "proj", f"doc {i}")
            store.end_run("shared", run, "complete")

    run_threads(work, 8)
    assert len(store.list_tickets()) == 9
    runs = store.list_runs("shared")
    assert len(runs) == 40 and all(r["status"] == "complete" for r in runs)
    assert len(store.list_turns(ticket_id="shared")) == 80
    assert all(store.memory_docs(f"t{i}") == [f"doc {i}"] for i in range(8))


def test_two_stores_on_one_file(tmp_path):
    path = tmp_path / "t.db"
    a, b = TicketStore(path), TicketStore(path)
    try:
        a.upsert_ticket(ticket("seen-by-b"))
        assert b.get_ticket("seen-by-b").title == "Ticket seen-by-b"

        def work(i):
            s = a if i % 2 else b
            for j in range(10):
                s.upsert_ticket(ticket(f"t{i}-{j}"))
                s.set_status(f"t{i}-{j}", TicketStatus.COMPLETE)

        run_threads(work, 6)
        assert len(a.list_tickets(status="complete")) == 60
        assert len(b.list_tickets()) == 61
    finally:
        a.close()
        b.close()


def test_two_processes_write_to_one_file(tmp_path):
    path = tmp_path / "t.db"
    child_code = textwrap.dedent(f"""
        from tickets.model import Ticket
        from tickets.store import TicketStore
        s = TicketStore({str(path)!r})
        for j in range(40):
            s.upsert_ticket(Ticket(id=f"child-{{j}}", project_id="p", title="c", project_path="/tmp"))
            s.add_memory_doc(f"child-{{j}}", "p", "doc")
        s.close()
    """)
    with TicketStore(path) as s:
        child = subprocess.Popen([sys.executable, "-c", child_code], cwd=Path(__file__).parents[2],
                                 stderr=subprocess.PIPE, text=True)
        for j in range(40):
            s.upsert_ticket(ticket(f"parent-{j}"))
            s.add_memory_doc(f"parent-{j}", "p", "doc")
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        ids = {t.id for t in s.list_tickets()}
        assert len(ids) == 80
        assert all(s.memory_docs(i) == ["doc"] for i in ids)


def test_a_run_ends_only_through_end_run():
    # finish_run, interrupt_run and release_claim ended runs piecemeal (no run_end event, the
    # claim left or the ticket's status unset); end_run does all of it in one transaction.
    for name in ("finish_run", "interrupt_run", "release_claim"):
        assert not hasattr(TicketStore, name), name
