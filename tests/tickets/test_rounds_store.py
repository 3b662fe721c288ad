"""The store side of review rounds, on SQLite and PostgreSQL: a round's run carries the ticket's
branch, is claimed atomically (two processes asking at once start it once), and feedback is kept
per run."""

from __future__ import annotations

import multiprocessing

import pytest

from tickets.model import Ticket
from tickets.rounds import ROUND, STORED
from tickets.store import TicketStore


@pytest.fixture
def store(store_target, tmp_path):
    with TicketStore(store_target) as s:
        s.upsert_ticket(Ticket(id="t", project_id="p", title="T", project_path=str(tmp_path)))
        run_id = s.claim_new_run("t", ["pending"])
        assert run_id is not None
        s.set_run_fields(run_id, isolation="worktree", repo="/r", base_branch="main", base_commit="b" * 40,
                         branch="middle/t", worktree="/r/wt", head_commit="h" * 40,
                         changes=[{"path": "a.py", "added": 1, "deleted": 0}])
        s.end_run("t", run_id, "complete")
        yield s


def test_a_round_carries_the_branch_and_is_claimed_once(store):
    claimed = store.claim_round("t", "also handle empty input", lease_s=60, carry=["earlier words"])
    assert claimed is not None
    kind, run_id, number = claimed
    run = store.get_run(run_id)
    assert kind == ROUND and number == 2 and store.round_of(run_id) == 2 and run["status"] == "running"
    assert (run["branch"], run["base_commit"], run["worktree"], run["head_commit"]) == (
        "middle/t", "b" * 40, "/r/wt", "h" * 40)
    assert store.get_ticket("t").status.value == "running" and store.get_claim("t").run_id == run_id
    assert [(e["text"], e["round"], e["carried"]) for e in store.feedback(run_id)] == [
        ("also handle empty input", 2, ["earlier words"])]
    # Running now: a second feedback is stored for that round, not a second round.
    assert store.claim_round("t", "again", lease_s=60, or_store=False) is None
    assert store.claim_round("t", "again", lease_s=60)[:2] == (STORED, run_id)
    assert len(store.list_runs("t")) == 2
    store.add_feedback("t", run_id, "while it runs")
    assert [e["text"] for e in store.feedback(run_id)] == ["also handle empty input", "again", "while it runs"]
    store.end_run("t", run_id, "complete")
    assert store.claim_round("t", "third", lease_s=60)[::2] == (ROUND, 3)


def test_feedback_for_a_run_that_completed_is_refused_not_lost(store):
    """A run's end and the insert take turns: feedback that comes after the end is not stored
    with the ended run (nobody would read it); the caller opens the next round with it."""
    run_id = store.latest_run("t")["id"]
    assert store.add_feedback("t", run_id, "too late") is None
    assert store.feedback(run_id) == []


def test_a_conflicted_ticket_round_records_why(store):
    store.set_status("t", "conflict", "merging into main conflicts in a.py")
    _, run_id, _ = store.claim_round("t", "fix it", lease_s=60)
    assert store.feedback(run_id)[0]["conflict"] == "merging into main conflicts in a.py"


def test_retired_docs_are_kept_deleted(store):
    store.add_memory_doc("t", "p", "round one")
    store.add_memory_doc("t", "p", "round two")
    assert store.retire_memory_docs("t", ["round one"]) == 1
    assert store.memory_docs("t") == ["round two"]
    assert store.memory_docs("t", include_deleted=True) == ["round one", "round two"]


def _claim(target: str, text: str, results, done) -> None:
    with TicketStore(target) as s:
        delivered = s.claim_round("t", text, lease_s=60)
        assert delivered is not None
        results.put(delivered[0])
        done.wait(60)  # a round's claim lives while its process does (the process drives the round)


def test_two_processes_asking_at_once_start_one_round_and_both_words_reach_it(store, store_target):
    ctx = multiprocessing.get_context("spawn")
    results, done = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_claim, args=(store_target, f"from process {n}", results, done)) for n in range(2)]
    for p in procs:
        p.start()
    try:
        assert sorted(results.get(timeout=60) for _ in procs) == [ROUND, STORED]
    finally:
        done.set()
        for p in procs:
            p.join(60)
    assert len(store.list_runs("t")) == 2
    assert sorted(e["text"] for e in store.feedback(store.latest_run("t")["id"])) == [
        "from process 0", "from process 1"]


def test_a_feedback_label_says_who_asked_and_trusts_no_stored_by():
    from tickets.rounds import HUMAN, MAX_BY_CHARS, feedback_label

    assert feedback_label({"text": "x"}) == HUMAN == "the human's feedback"
    assert feedback_label({"by": "pull request #2: review by alice"}) == \
        "feedback from pull request #2: review by alice"
    for bad in (5, ["a"], {"a": 1}, "", "   ", None):  # a store edited by hand: the human's
        assert feedback_label({"by": bad}) == HUMAN
    assert len(feedback_label({"by": "y" * 5000})) == len("feedback from ") + MAX_BY_CHARS
