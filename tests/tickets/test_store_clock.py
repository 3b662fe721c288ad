"""Run and turn times come from the database's clock, not the writing machine's: a fleet's
machines disagree, and a dependent's start must not read before its dependency's end."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tickets.model import Ticket
from tickets.store import TicketStore

WRONG = "2001-01-01T00:00:00.000000+00:00"  # this machine's clock, badly off


@pytest.fixture
def wrong_clock(monkeypatch):
    import tickets.claims
    import tickets.queue
    import tickets.rounds
    import tickets.run_end
    import tickets.store

    for module in (tickets.claims, tickets.queue, tickets.rounds, tickets.run_end, tickets.store):
        monkeypatch.setattr(module, "utc_now", lambda: WRONG)


def _recent(stamp: str | None) -> bool:
    assert stamp is not None
    when = datetime.fromisoformat(stamp)
    return abs((datetime.now(timezone.utc) - when).total_seconds()) < 3600


def test_runs_and_turns_are_timed_by_the_database(store_target, tmp_path, wrong_clock):
    with TicketStore(store_target) as store:
        for tid in ("a", "b", "c"):
            store.upsert_ticket(Ticket(id=tid, project_id="p", title=tid, project_path=str(tmp_path)))
        new = store.claim_next()
        store.start_turn(new.run_id, 1, "do it", None, False, token=new.token)
        store.finish_turn(new.run_id, 1, response="done", is_error=False, error=None, cost_usd=0, duration_ms=1,
                          usage={}, num_turns=1, token=new.token)
        store.end_run(new.ticket_id, new.run_id, "complete", token=new.token)
        other = store.claim_new_run("b", ["pending"])
        made = store.create_run("c")
        runs = [store.get_run(r) for r in (new.run_id, other, made)]
        turn = store.get_turn(new.run_id, 1)
    assert all(_recent(r["started_at"]) for r in runs)
    assert _recent(runs[0]["ended_at"]) and _recent(turn["started_at"]) and _recent(turn["ended_at"])
    first = runs[0]
    assert first["started_at"] <= turn["started_at"] <= turn["ended_at"] <= first["ended_at"] <= runs[1]["started_at"]
    assert len(runs[0]["started_at"]) == len(WRONG)  # the stored text keeps one format, sortable as text
