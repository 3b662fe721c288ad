"""The worker's queue: bounded retries of passing failures (a Claude Code turn that crashed), with
growing waits and said in its output, and none for a failed check or the agent's "failed"."""

from __future__ import annotations

import pytest
from graph_helpers import _TestPlugin, add_ticket, make_config

from orchestrator.coding_agent.base import TurnResult
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.running.batch import LogView
from orchestrator.running.fleet import work
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing.fakes import PerTicketAgentLLM, RecordingCodingAgent, decision_reply, plan_reply


class Said(LogView):
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def say(self, ticket_id: str, msg: str) -> None:
        self.lines.append((ticket_id, msg))


def crashed(prompt, cwd):
    return TurnResult(session_id=None, text="", is_error=True, error="Claude Code exited with code 137",
                      exit_code=137)


def _worker(tmp_path, project, llm, agent, store=None, memory=None, **run):
    config = make_config(tmp_path)
    for key, value in (memory or {}).items():
        setattr(config.memory, key, value)
    for key, value in run.items():
        setattr(config.run, key, value)
    for key, value in (store or {}).items():
        setattr(config.store, key, value)
    registry = PluginRegistry(load_entry_points=False, extra_plugins=(_TestPlugin(),))
    # project_override: a worker's clone (what makes its runs resumable by any worker)
    return Orchestrator(config, llm=llm, coding_agent=agent, registry=registry, project_override=str(project))


def test_a_crashed_claude_code_turn_is_retried_a_bounded_number_of_times_and_said(tmp_path, project):
    agent = RecordingCodingAgent([crashed] * 10)
    llm = PerTicketAgentLLM({"Alpha": [plan_reply("write a.py")]})
    view = Said()
    with _worker(tmp_path, project, llm, agent, retries=2, retry_wait_s=0) as orch:
        add_ticket(orch, project, "a", title="Alpha")
        report = work(orch, parallel=1, once=True, view=view, idle_wait_s=0.05)
        assert len(agent.calls) == 3  # the first try and two retries, then no more
        assert orch.store.get_ticket("a").status.value == "failed"
        run = orch.store.latest_run("a")
        assert (orch.store.run_end_data(run["id"]) or {}).get("retries_spent") == 2
        assert orch.store.retry_of("a") == (0, None)  # a person's `middle resume` counts afresh
    said = [msg for tid, msg in view.lines if tid == "a"]
    assert any("retry 1 of 2" in m for m in said) and any("retry 2 of 2" in m for m in said)
    assert any("retries are spent" in m and "middle resume a" in m for m in said)
    assert [o.status for o in report.started] == ["failed"]


def test_retry_waits_grow(tmp_path, project):
    with _worker(tmp_path, project, PerTicketAgentLLM({}), RecordingCodingAgent(), retries=3,
                 retry_wait_s=10) as orch:
        add_ticket(orch, project, "a", title="Alpha")
        waits = []
        for _ in range(4):
            token = orch.store.claim_for_resume("a", orch.store.create_run("a"))
            orch.lifecycle.fail("a", str(orch.store.latest_run("a")["id"]), "Claude Code crashed", resumable=True,
                                transient=True, token=token)
            end = orch.store.run_end_data(orch.store.latest_run("a")["id"]) or {}
            waits.append((end.get("retry") or {}).get("in_s") or end.get("retries_spent"))
        assert waits == [10, 20, 40, 3]  # then spent (3 retries)
        assert orch.store.take_retry() is None  # none due before its wait


def test_a_failed_check_or_an_agents_failure_is_never_retried(tmp_path, project):
    with _worker(tmp_path, project, PerTicketAgentLLM({}), RecordingCodingAgent(), retries=3,
                 retry_wait_s=0) as orch:
        for tid, how in (("c", {"check_failed": True}), ("f", {})):
            add_ticket(orch, project, tid, title=tid)
            run_id = orch.store.claim_new_run(tid, ["pending"])
            orch.lifecycle.fail(tid, run_id, "the check still fails" if how else "the agent gave up",
                                resumable=True, **how)
            assert orch.store.retry_of(tid) == (0, None)
        assert orch.store.take_retry() is None


@pytest.mark.postgres
def test_a_worker_process_holds_two_connections_at_parallel_1(pg_url, tmp_path):
    """One pool per process (the checkpointer borrows the store's), one connection per ticket at
    once, plus the one that listens for runnable tickets."""
    import os

    import psycopg

    from orchestrator.running.checkpoints import open_checkpointer
    from tickets.model import Ticket
    from tickets.store import TicketStore

    with TicketStore(pg_url) as store:
        store.size_pool(1)  # what `middle worker --parallel 1` does
        checkpoints = open_checkpointer(pg_url, pool=store.pool_for(pg_url))
        assert checkpoints.saver.conn is store.pool_for(pg_url)
        store.upsert_ticket(Ticket(id="a", project_id="p", title="a", project_path=str(tmp_path)))
        new = store.claim_next()
        _put_checkpoint(checkpoints.saver, new.run_id)
        store.add_event(new.run_id, "a", "note", {"text": "working"})
        store.wait_for_runnable(0.2)  # listening
        with psycopg.connect(pg_url, autocommit=True) as admin:
            held = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                 (f"middle-{os.getpid()}",)).fetchone()[0]
        checkpoints.close()  # borrowed: the store's pool stays open
        assert store.get_ticket("a").status.value == "running"
    assert held == 2


def _put_checkpoint(saver, run_id: str) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    saver.put({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}, empty_checkpoint(), {}, {})


@pytest.mark.postgres
def test_a_worker_still_holds_two_connections_after_running_two_tickets(pg_url, tmp_path, project, monkeypatch):
    """The count does not grow with the tickets run: the store's one pool (sized to --parallel)
    plus the listening connection; memory in the same database (every backend shares the store)
    takes connections for its calls and gives them back."""
    import time

    import psycopg

    import backends.pg_database
    import orchestrator.memory.lock

    for module in (backends.pg_database, orchestrator.memory.lock):
        monkeypatch.setattr(module, "IDLE_S", 0.5)  # (5 s in a worker)

    def held() -> list[tuple[str, str]]:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            return admin.execute("SELECT application_name, query FROM pg_stat_activity"
                                 " WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchall()

    replies = {title: [plan_reply(f"write {title}.py"), decision_reply(True, "done")] for title in ("Alpha", "Beta")}
    memory = {"backend": "sliding_window", "url": pg_url}
    with _worker(tmp_path, project, PerTicketAgentLLM(replies), RecordingCodingAgent(), store={"url": pg_url},
                 memory=memory) as orch:
        orch.store.size_pool(1)  # what `middle worker --parallel 1` does
        add_ticket(orch, project, "a", title="Alpha")
        add_ticket(orch, project, "b", title="Beta")
        report = work(orch, parallel=1, once=True, view=Said(), idle_wait_s=0.05)
        assert sorted((o.ticket_id, o.status) for o in report.started) == [("a", "complete"), ("b", "complete")]
        assert orch.store.memory_docs("a") and orch.store.memory_docs("b")  # memory was used
        orch.store.wait_for_runnable(0.2)  # idle, listening
        deadline = time.monotonic() + 30
        while len(connections := held()) > 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # memory's connections close once unused
    assert len(connections) == 2, connections


def test_a_check_that_cannot_run_fails_the_ticket_on_a_worker_instead_of_claiming_it_again(tmp_path, project):
    """`middle run` leaves such a ticket pending (the user's config error, said once); a worker
    would claim a pending ticket again at once, so there it ends failed, saying why, and is not
    retried."""
    with _worker(tmp_path, project, PerTicketAgentLLM({}), RecordingCodingAgent(), retries=3,
                 retry_wait_s=0) as orch:
        orch.config.check.commands = ["no-such-test-runner --all"]
        add_ticket(orch, project, "a", title="Alpha")
        report = work(orch, parallel=1, once=True, view=Said(), idle_wait_s=0.05)
        assert [o.status for o in report.started] == ["failed"] and len(orch.store.list_runs("a")) == 1
        assert orch.store.get_ticket("a").status.value == "failed"
        assert "cannot run on the base commit" in orch.store.latest_run("a")["reason"]
