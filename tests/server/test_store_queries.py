"""The ticket store's aggregate queries the server reads (tickets/queries.py), on SQLite and PostgreSQL."""

from __future__ import annotations

from tickets.model import Ticket
from tickets.store import TicketStore


def _ticket(store: TicketStore, tid: str, project: str = "calc") -> None:
    store.upsert_ticket(Ticket(id=tid, project_id=project, title=tid, project_path="/tmp"))


def _ran(store: TicketStore, tid: str, cost: float, *, offline: bool, resumable: bool | None = None) -> str:
    run_id = store.claim_new_run(tid, ["pending", "failed"])
    assert run_id is not None
    if offline:
        store.set_run_fields(run_id, offline=1)
    store.start_turn(run_id, 1, "prompt", None, False)
    store.finish_turn(run_id, 1, response="ok", is_error=False, error=None, cost_usd=cost, duration_ms=1,
                      usage={}, num_turns=1)
    if resumable is None:
        store.end_run(tid, run_id, "complete")
    else:
        store.end_run(tid, run_id, "failed", "boom", event={"resumable": resumable})
    return run_id


def test_aggregates_on_every_engine(store_target):
    with TicketStore(store_target) as store:
        for tid in ("a", "b", "c"):
            _ticket(store, tid)
        _ticket(store, "z", project="other")
        _ran(store, "a", 0.25, offline=False)
        store.set_status("a", "merged")
        _ran(store, "b", 0.75, offline=True)
        failed = _ran(store, "c", 0.5, offline=False, resumable=False)
        retry = _ran(store, "c", 0.125, offline=False, resumable=True)
        store.add_memory_doc("a", "calc", "doc a")
        store.add_memory_doc("a", "calc", "doc a")  # indexed again by a rerun: one source
        store.add_memory_doc("b", "calc", "doc a")

        stats = store.ticket_stats()
        assert {k: (v["runs"], v["offline_runs"], v["turns"], v["cost_usd"]) for k, v in stats.items()} == {
            "a": (1, 0, 1, 0.25), "b": (1, 1, 1, 0.0), "c": (2, 0, 2, 0.625)}
        assert all(v["last_event_at"] for v in stats.values())
        assert store.project_totals() == [
            {"project": "calc", "tickets": 3, "done": 2, "failed": 1, "running": 0, "pending": 0,
             "cost_today_usd": 0.875, "cost_total_usd": 0.875, "offline_runs": 1},
            {"project": "other", "tickets": 1, "done": 0, "failed": 0, "running": 0, "pending": 1,
             "cost_today_usd": 0.0, "cost_total_usd": 0.0, "offline_runs": 0}]
        assert [s["ticket_id"] for s in store.doc_sources("calc")["doc a"]] == ["a", "b"]
        assert store.project_ids() == ["calc", "other"]
        assert store.run_end_data(failed)["resumable"] is False
        assert store.run_end_data(retry)["resumable"] is True
        newest = store.last_event_id()
        assert newest == store.last_event_id(run_id=retry) == store.last_event_id(ticket_id="c") > 0
        assert store.last_event_id(ticket_id="z") == 0


def test_resume_facts_read_many_tickets_at_once_on_every_engine(store_target):
    # The board reads these for every failed, interrupted or running ticket on each refresh:
    # batched, they must say what the one-ticket reads say.
    with TicketStore(store_target) as store:
        for tid in ("a", "b", "c"):
            _ticket(store, tid)
        first = _ran(store, "a", 0.1, offline=False, resumable=False)
        second = _ran(store, "a", 0.1, offline=False, resumable=True)
        running = store.claim_new_run("b", ["pending"])
        assert running is not None
        facts = store.resume_facts(["a", "b", "c", "a", "nope"])
        assert set(facts) == {"a", "b"}  # no run, no facts
        assert facts["a"].run["id"] == second != first
        assert facts["a"].run_end == store.run_end_data(second) and facts["a"].run_end["resumable"]
        assert facts["a"].claim is None
        assert facts["b"].run["id"] == running and facts["b"].run["status"] == "running"
        assert facts["b"].claim == store.get_claim("b") and facts["b"].claim is not None
        assert facts["b"].run_end is None
        for tid in ("a", "b"):
            assert facts[tid].run == store.latest_run(tid)
        assert store.resume_facts([]) == {}
