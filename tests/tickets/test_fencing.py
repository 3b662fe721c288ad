"""Fencing: a claim carries a token raised by every claim and takeover; every write a run's owner
makes names it, and a stale owner (its run taken over) is refused with nothing changed. Leases
are set and judged by the database's clock. On SQLite and PostgreSQL."""

from __future__ import annotations

import os

import pytest

import tickets.claims
import tickets.model
from tickets.errors import ClaimLost
from tickets.model import Ticket
from tickets.store import TicketStore

_RESULT = dict(response="done", is_error=False, error=None, cost_usd=0.1, duration_ms=5, usage={}, num_turns=1)


@pytest.fixture
def store(store_target, tmp_path):
    with TicketStore(store_target) as s:
        s.upsert_ticket(Ticket(id="t0", project_id="p", title="T", project_path=str(tmp_path)))
        yield s


def test_every_claim_and_takeover_raises_the_token(store, monkeypatch):
    from tickets.claims import HOST_VARIABLE

    run_id = store.claim_new_run("t0", ["pending"])
    first = store.claim_of_run(run_id).token
    second = store.claim_for_resume("t0", run_id)
    monkeypatch.setenv(HOST_VARIABLE, "machine-b")
    third = store.claim_for_resume("t0", run_id)
    assert first < second < third
    assert store.claim_of_run(run_id).token == third
    store.check_fence(run_id, third)
    with pytest.raises(ClaimLost, match=rf"the worker on machine-b \(pid {os.getpid()}\) took it over"):
        store.check_fence(run_id, second)
    with pytest.raises(ClaimLost, match=rf"the worker on machine-b \(pid {os.getpid()}\) took it over"):
        store.set_run_fields(run_id, head_commit="abc", token=second)  # inside the write's transaction


def test_a_stale_owner_is_refused_at_every_write_and_changes_nothing(store):
    run_id = store.claim_new_run("t0", ["pending"])
    stale = store.claim_of_run(run_id).token
    store.start_turn(run_id, 1, "first prompt", "s1", False, token=stale)
    store.add_event(run_id, "t0", "note", {"text": "before"}, token=stale)
    fresh = store.claim_for_resume("t0", run_id)  # another runner takes the run over
    events_before = store.list_events(run_id=run_id)
    writes = {
        "event": lambda: store.add_event(run_id, "t0", "note", {"text": "stale"}, token=stale),
        "fields": lambda: store.set_run_fields(run_id, head_commit="deadbeef", token=stale),
        "start turn": lambda: store.start_turn(run_id, 2, "stale prompt", "s2", False, token=stale),
        "finish turn": lambda: store.finish_turn(run_id, 1, token=stale, **_RESULT),
        "assess": lambda: store.set_turn_assessment(run_id, 1, "m", {"action": "complete"}, token=stale),
        "end": lambda: store.end_run("t0", run_id, "complete", token=stale),
    }
    for name, write in writes.items():
        with pytest.raises(ClaimLost):
            write()
        assert store.claim_of_run(run_id).token == fresh, name  # the new owner's claim stands
    run = store.get_run(run_id)
    assert run["status"] == "running" and run["head_commit"] is None
    assert [t["turn_no"] for t in store.list_turns(run_id=run_id)] == [1]
    assert store.get_turn(run_id, 1)["status"] == "running"
    assert store.list_events(run_id=run_id) == events_before
    # The new owner writes on.
    store.finish_turn(run_id, 1, token=fresh, **_RESULT)
    assert store.end_run("t0", run_id, "complete", token=fresh)
    assert store.get_claim("t0") is None
    with pytest.raises(ClaimLost):  # ended: no owner's token is good any more
        store.add_event(run_id, "t0", "note", {"text": "late"}, token=fresh)


def test_leases_are_judged_by_the_database_clock_not_this_machines(store, monkeypatch):
    """A machine whose clock runs a day fast must not find a live claim expired (and take it
    over), nor one whose clock runs slow keep an expired one alive."""
    run_id = store.claim_new_run("t0", ["pending"], lease_s=3600, pid=1)  # pid 1: not ours
    fast = "2999-01-01T00:00:00.000Z"
    monkeypatch.setattr(tickets.claims, "utc_now", lambda: fast)
    monkeypatch.setattr(tickets.model, "utc_now", lambda: fast)
    claim = store.get_claim("t0")
    assert claim.expired is False
    assert store.refresh_claim("t0", run_id, 3600, token=claim.token)
    # A lease that ran out by the database's clock is expired, whatever this machine says.
    store.refresh_claim("t0", run_id, -1, token=claim.token)
    monkeypatch.setattr(tickets.claims, "utc_now", lambda: "2000-01-01T00:00:00.000Z")
    assert store.get_claim("t0").expired is True


def test_a_refresh_with_a_stale_token_is_refused(store):
    run_id = store.claim_new_run("t0", ["pending"])
    stale = store.claim_of_run(run_id).token
    store.claim_for_resume("t0", run_id)
    assert not store.refresh_claim("t0", run_id, 60, token=stale)
