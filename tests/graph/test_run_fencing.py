"""A run that loses its claim stops at once and writes nothing more: taken over mid-turn, its
lease not renewable, its checkpoints refused; its Claude Code processes killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from graph_helpers import add_ticket, make_config, make_orchestrator

from orchestrator.errors import ClaimLost, StoreUnavailable
from orchestrator.lifecycle.run_lifecycle import RunLifecycle
from orchestrator.procs.orphans import MARK_VAR, own_mark
from orchestrator.running.checkpoints import open_checkpointer
from orchestrator.running.run import Run, fence_checkpoints, stop_run_processes
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from tickets.claims import this_host
from tickets.model import Ticket
from tickets.store import TicketStore


def _wait(predicate, what: str, deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting: {what}")
        time.sleep(0.05)


def test_a_run_taken_over_mid_turn_writes_nothing_more_and_ends_lost(tmp_path, project, monkeypatch):
    from tickets.claims import HOST_VARIABLE

    config = make_config(tmp_path, memory=False)
    taken: dict[str, int] = {}

    def turn_while_taken_over(prompt, cwd):
        store = orch.store
        run_id = store.latest_run("t1")["id"]
        monkeypatch.setenv(HOST_VARIABLE, "machine-b")  # the next claim is another machine's
        with TicketStore(config.store_target) as other:  # another runner, its own connection
            taken["token"] = other.claim_for_resume("t1", run_id)
        (cwd / "hello.py").write_text("print('stale')\n")
        return "Created hello.py"

    llm = ScriptedAgentLLM([plan_reply("Create hello.py"), decision_reply(True, "Wrote hello.py")])
    worker = RecordingCodingAgent([turn_while_taken_over])
    with make_orchestrator(config, llm, worker) as orch:
        add_ticket(orch, project)
        outcome = orch.run_ticket("t1")
        run = orch.store.latest_run("t1")
        assert outcome.status == "lost"
        assert f"the worker on machine-b (pid {os.getpid()}) took it over" in outcome.reason
        # The stale owner finished no turn, assessed nothing, committed nothing, ended nothing.
        assert run["status"] == "running" and run["head_commit"] is None
        assert orch.store.get_turn(run["id"], 1)["status"] == "running"
        assert orch.store.claim_of_run(run["id"]).token == taken["token"]  # the new owner's claim stands
        kinds = [e["kind"] for e in orch.store.list_events(run_id=run["id"])]
        assert "run_end" not in kinds and "decision" not in kinds
    assert len(llm.calls) == 1  # the middle agent was not asked to assess the stale turn


def _marked_sleeper(session_id: str) -> subprocess.Popen:
    """A process marked as one of this process's Claude Code sessions (its own process group)."""
    env = {**os.environ, MARK_VAR: own_mark(session_id)}
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env, start_new_session=True)


@pytest.fixture
def claimed(store_target, tmp_path):
    with TicketStore(store_target) as store:
        store.upsert_ticket(Ticket(id="t1", project_id="p", title="T", project_path=str(tmp_path)))
        run_id = store.claim_new_run("t1", ["pending"])
        yield store, run_id


def _run(store, run_id: str, lease_s: float) -> Run:
    run = Run.held(store, RunLifecycle(store), "t1", run_id, lease_s=lease_s, reconnect_s=1)
    run.on_lost(lambda: stop_run_processes(run))
    return run


def test_the_heartbeat_finds_the_run_taken_over_and_kills_its_claude_code(claimed):
    store, run_id = claimed
    run = _run(store, run_id, lease_s=0.6)  # renewed every 0.2 s
    session = f"sess-{uuid.uuid4().hex}"
    sleeper = _marked_sleeper(session)
    run.sessions.add(session)
    try:
        with run:
            store.claim_for_resume("t1", run_id)  # another runner takes it over
            _wait(run.lost.is_set, "the run to notice its claim was taken")
            assert sleeper.wait(timeout=20) is not None  # its Claude Code is killed
        assert f"taken over by the worker on {this_host()} (pid {os.getpid()})" in run.lost_why
        with pytest.raises(ClaimLost):
            run.guard()
        with pytest.raises(ClaimLost):
            run.set_fields(head_commit="abc")
    finally:
        if sleeper.poll() is None:
            os.killpg(sleeper.pid, signal.SIGKILL)
            sleeper.wait()


def test_a_heartbeat_that_cannot_renew_stops_the_run_before_its_lease_runs_out(claimed, monkeypatch):
    store, run_id = claimed
    run = _run(store, run_id, lease_s=3.0)
    assert store.refresh_claim("t1", run_id, 3.0, token=run.token)  # the lease in the store: 3 s

    def out(*a, **k):
        raise StoreUnavailable("the ticket store is out of reach")

    seen: list[bool] = []
    run.on_lost(lambda: seen.append(bool(store.get_claim("t1").expired)))  # by the database's clock
    monkeypatch.setattr(store, "refresh_claim", out)
    with run:
        _wait(run.lost.is_set, "the run to stop while its lease cannot be renewed")
    assert "could not be renewed" in run.lost_why
    assert seen == [False]  # stopped while its lease still held: no other runner could have it yet
    assert "could not be renewed" in run.lost_reason()  # and no other runner has it


def test_a_run_lost_while_it_was_stopped_says_who_took_it_over(claimed, monkeypatch):
    # Stopped (SIGSTOP) past its lease: when it wakes its heartbeat loses the run for want of a
    # renewal, but the lease ran out long ago and another machine has the run already.
    from orchestrator.running.policy import end_on_exception
    from tickets.claims import HOST_VARIABLE

    store, run_id = claimed
    run = _run(store, run_id, lease_s=60)
    run.lose("the claim on ticket t1 could not be renewed for 90s of its 60s lease: the run stopped here "
             "before another runner may take it over")
    monkeypatch.setenv(HOST_VARIABLE, "machine-b")
    store.claim_for_resume("t1", run_id)
    ending = end_on_exception(ClaimLost(run.lost_why), run)
    assert ending.status == "lost"
    assert f"the worker on machine-b (pid {os.getpid()}) took it over" in ending.reason
    assert "before another runner may take it over" not in ending.reason


def test_a_stale_owners_checkpoints_are_refused(claimed, tmp_path):
    store, run_id = claimed
    run = _run(store, run_id, lease_s=60)
    checkpoints = open_checkpointer(tmp_path / "checkpoints.sqlite")
    saver = checkpoints.saver
    fence_checkpoints(saver, {run_id: run})
    config = {"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}
    from langgraph.checkpoint.base import empty_checkpoint

    saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    assert saver.get_tuple(config) is not None
    store.claim_for_resume("t1", run_id)
    with pytest.raises(ClaimLost):
        saver.put(config, {**empty_checkpoint(), "id": "later"}, {"source": "loop", "step": 0}, {})
    assert saver.get_tuple(config).checkpoint["id"] != "later"
    assert run.lost.is_set()
    checkpoints.close()


def test_a_write_in_another_thread_that_meets_the_runs_own_end_is_no_loss(claimed, tmp_path):
    """The end releases the claim in its transaction a moment before the run is marked ended. A
    checkpoint LangGraph writes in its own thread, or an event, refused in that moment met this
    process's own end, not a takeover: it waits for the end, then is written as the ended run's,
    and the run stays complete (before, it was reported "lost" though its end was stored)."""
    import threading

    store, run_id = claimed
    run = _run(store, run_id, lease_s=60)
    checkpoints = open_checkpointer(tmp_path / "checkpoints.sqlite")
    saver = checkpoints.saver
    fence_checkpoints(saver, {run_id: run})
    config = {"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}
    from langgraph.checkpoint.base import empty_checkpoint

    seen: list[object] = []
    racers: list[threading.Thread] = []
    real_end_run = store.end_run

    def racing_write() -> None:
        try:
            saver.put(config, {**empty_checkpoint(), "id": "racing"}, {"source": "loop", "step": 3}, {})
            run.events("note", {"text": "written in the end's moment"})
            seen.append("written")
        except Exception as exc:  # noqa: BLE001 - what the test reports
            seen.append(exc)

    def end_run_then_race(*args, **kwargs):
        ended = real_end_run(*args, **kwargs)  # the claim is gone; the run is not marked ended yet
        racer = threading.Thread(target=racing_write)
        racer.start()
        racer.join(0.5)
        seen.append("waited" if racer.is_alive() else "did not wait")
        racers.append(racer)
        return ended

    store.end_run = end_run_then_race  # type: ignore[method-assign]
    try:
        assert run.complete("done") is True
    finally:
        store.end_run = real_end_run  # type: ignore[method-assign]
    racers[0].join(10)
    assert seen == ["waited", "written"], seen
    assert not run.lost.is_set()
    run.guard()  # nothing lost: the driver reports the run as it ended
    assert store.get_run(run_id)["status"] == "complete"
    assert saver.get_tuple(config).checkpoint["id"] == "racing"
    assert "written in the end's moment" in [e["data"].get("text") for e in store.list_events(run_id=run_id)]
    checkpoints.close()
