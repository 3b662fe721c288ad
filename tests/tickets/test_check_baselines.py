"""Check baselines (a check command's result on a base commit, shared by every ticket and machine
from it) are a cache the fleet shares, so they are fenced like the run's other writes: written
under the run's token, never from a killed, timed-out or cancelled check, not trusted once the
run that measured them was taken over, and dropped by `middle gc --baselines`. On SQLite and
PostgreSQL."""

from __future__ import annotations

import pytest

from tickets.errors import ClaimLost
from tickets.model import Ticket
from tickets.store import TicketStore


def _result(exit_code, *, timed_out=False):
    return {"command": "make test", "exit_code": exit_code, "duration_s": 0.1, "tail": "", "timed_out": timed_out,
            "failing": None}


@pytest.fixture
def store(store_target, tmp_path):
    with TicketStore(store_target) as s:
        s.upsert_ticket(Ticket(id="t0", project_id="p", title="T", project_path=str(tmp_path)))
        yield s


def test_a_killed_timed_out_or_cancelled_check_is_never_a_baseline(store):
    for killed in (_result(-15), _result(None), _result(None, timed_out=True), _result(1, timed_out=True)):
        assert store.put_check_baseline("c1", "make test", killed) is False
    assert store.check_baseline("c1", "make test") is None
    assert store.put_check_baseline("c1", "make test", _result(1)) is True
    assert store.check_baseline("c1", "make test")["exit_code"] == 1


def test_a_stale_owner_writes_no_baseline(store):
    run_id = store.claim_new_run("t0", ["pending"])
    stale = store.claim_of_run(run_id).token
    store.claim_for_resume("t0", run_id)  # taken over
    with pytest.raises(ClaimLost):
        store.put_check_baseline("c1", "make test", _result(0), run_id=run_id, token=stale)
    assert store.check_baseline("c1", "make test") is None


def test_a_baseline_of_a_run_taken_over_since_is_measured_again_and_replaced(store):
    run_id = store.claim_new_run("t0", ["pending"])
    token = store.claim_of_run(run_id).token
    assert store.put_check_baseline("c1", "make test", _result(2), run_id=run_id, token=token)
    assert store.check_baseline("c1", "make test")["exit_code"] == 2
    assert "recorded_by" not in store.check_baseline("c1", "make test")
    newer = store.claim_for_resume("t0", run_id)  # the run that measured it was lost
    assert store.check_baseline("c1", "make test") is None
    assert store.put_check_baseline("c1", "make test", _result(0), run_id=run_id, token=newer)
    assert store.check_baseline("c1", "make test")["exit_code"] == 0


def test_a_trusted_baseline_wins_a_race_and_an_old_killed_one_is_replaced(store):
    store.put_check_baseline("c1", "make test", _result(0))
    assert store.put_check_baseline("c1", "make test", _result(1)) is False  # the first measurement stays
    assert store.check_baseline("c1", "make test")["exit_code"] == 0
    # A killed result an earlier version stored: not trusted, replaced by the next measurement.
    with store._write() as conn:
        conn.execute("UPDATE check_baselines SET result = ? WHERE base_commit = ?",
                     ('{"command": "make test", "exit_code": -15, "timed_out": false}', "c1"))
    assert store.check_baseline("c1", "make test") is None
    assert store.put_check_baseline("c1", "make test", _result(1)) is True


def test_gc_baselines_drops_them(store):
    store.put_check_baseline("c1", "make test", _result(0))
    store.put_check_baseline("c2", "make test", _result(0))
    assert store.drop_check_baselines() == 2
    assert store.check_baseline("c1", "make test") is None


def test_a_baseline_kept_in_another_format_is_replaced(store):
    store.put_check_baseline("c1", "make test", {**_result(1), "format": 1})
    assert store.put_check_baseline("c1", "make test", {**_result(0), "format": 2}) is True
    assert store.check_baseline("c1", "make test")["format"] == 2
