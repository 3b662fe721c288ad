"""Limits end a ticket as failed with a clear reason; checkpoints let `resume` finish a run."""

from __future__ import annotations

import pytest
from graph_helpers import add_ticket, make_config, make_orchestrator

from orchestrator.coding_agent.base import TurnResult
from orchestrator.plugin_api import hookimpl
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply


class Crash(BaseException):
    """Stands in for the process dying (not an Exception, so nothing on the way catches it)."""


def test_max_turns_fails_with_reason_and_keeps_turns(tmp_path, project):
    llm = ScriptedAgentLLM([plan_reply("p1")] + [decision_reply(False, next_prompt="again")] * 2)
    config = make_config(tmp_path, max_turns=2)
    with make_orchestrator(config, llm, RecordingCodingAgent(["r1", "r2"])) as orch:
        add_ticket(orch, project)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed"
        assert "turn limit reached: 2 turns" in outcome.reason
        ticket = orch.store.get_ticket("t1")
        assert ticket.status == "failed" and "max_turns" in ticket.status_reason
        assert len(orch.store.list_turns(ticket_id="t1")) == 2
        assert orch.store.memory_docs("t1") == []  # nothing indexed for a failed ticket


def test_max_cost_fails_with_reason(tmp_path, project):
    llm = ScriptedAgentLLM([plan_reply("p1"), decision_reply(False, next_prompt="more")])
    config = make_config(tmp_path, max_cost_usd=0.5)
    worker = RecordingCodingAgent(["expensive"], cost_per_turn=0.75)
    with make_orchestrator(config, llm, worker) as orch:
        add_ticket(orch, project)
        outcome = orch.run_ticket("t1")
    assert outcome.status == "failed" and "cost limit reached" in outcome.reason
    assert "`middle doctor` says at what price" in outcome.reason  # where a counted price comes from
    assert outcome.cost_usd == pytest.approx(0.75)
    assert len(worker.calls) == 1


def test_worker_error_fails_ticket_keeps_turns_and_resume_retries(tmp_path, project):
    config = make_config(tmp_path)
    bad = TurnResult(session_id=None, text="", is_error=True, error="Claude Code exited 1: boom",
                     exit_code=1)
    llm = ScriptedAgentLLM([plan_reply("p1"), decision_reply(False, next_prompt="p2")])
    worker = RecordingCodingAgent(["r1", bad])
    with make_orchestrator(config, llm, worker) as orch:
        add_ticket(orch, project)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "failed" and outcome.resumable
        assert "turn 2" in outcome.reason and "boom" in outcome.reason and "middle resume t1" in outcome.reason
        turns = orch.store.list_turns(ticket_id="t1")
        assert [(t["turn_no"], t["status"]) for t in turns] == [(1, "done"), (2, "error")]
    # A new process resumes: turn 1 is not re-run, turn 2 is retried in the same session.
    llm2 = ScriptedAgentLLM([decision_reply(True, "finally")])
    worker2 = RecordingCodingAgent(["r2"])
    with make_orchestrator(config, llm2, worker2) as orch:
        outcome = orch.resume("t1")
        assert outcome.status == "complete"
        assert worker2.prompts == ["p2"] and worker2.calls[0]["resume"] is True
        assert worker2.calls[0]["session_id"] == worker.calls[0]["session_id"]
        assert orch.store.get_ticket("t1").status == "complete"


def test_crash_mid_turn_resumes_without_repeating_completed_turns(tmp_path, project):
    config = make_config(tmp_path)

    def crash(prompt, cwd):
        raise Crash()

    llm = ScriptedAgentLLM([plan_reply("p1"), decision_reply(False, next_prompt="p2")])
    worker = RecordingCodingAgent(["r1", crash])
    with make_orchestrator(config, llm, worker) as orch:
        add_ticket(orch, project)
        with pytest.raises(Crash):
            orch.run_ticket("t1")
    llm2 = ScriptedAgentLLM([decision_reply(True, "done")])
    worker2 = RecordingCodingAgent(["r2"])
    with make_orchestrator(config, llm2, worker2) as orch:
        assert orch.resume("t1").status == "complete"
        assert worker2.prompts == ["p2"]  # turn 1 was not run again
        assert [t["response"] for t in orch.store.list_turns(ticket_id="t1")] == ["r1", "r2"]


class _CrashAfterTurn:
    """A plugin whose on_turn_end kills the process after turn 1 finished, before its checkpoint."""

    @hookimpl
    def on_turn_end(self, ticket, run_id, turn):
        if turn["turn_no"] == 1:
            raise Crash()


def test_completed_turn_is_never_run_twice_even_without_its_checkpoint(tmp_path, project):
    from graph_helpers import _TestPlugin

    from orchestrator.plugins.manager import PluginRegistry
    from orchestrator.running.orchestrator import Orchestrator

    config = make_config(tmp_path)
    llm = ScriptedAgentLLM([plan_reply("p1")])
    worker = RecordingCodingAgent(["r1"])
    registry = PluginRegistry(load_entry_points=False, extra_plugins=(_TestPlugin(), _CrashAfterTurn()))
    with Orchestrator(config, llm=llm, coding_agent=worker, registry=registry) as orch:
        add_ticket(orch, project)
        with pytest.raises(Crash):
            orch.run_ticket("t1")
    llm2 = ScriptedAgentLLM([decision_reply(True, "done")])
    worker2 = RecordingCodingAgent([])
    with make_orchestrator(config, llm2, worker2) as orch:
        assert orch.resume("t1").status == "complete"
    assert worker2.calls == []  # the finished turn's stored response was used
    assert "r1" in llm2.user_messages[0]


def test_resume_refuses_finished_or_unknown_runs(tmp_path, project):
    from orchestrator.errors import TicketError

    config = make_config(tmp_path)
    llm = ScriptedAgentLLM([plan_reply("p1"), decision_reply(True, "s")])
    with make_orchestrator(config, llm, RecordingCodingAgent(["r"])) as orch:
        add_ticket(orch, project)
        add_ticket(orch, project, tid="t2")
        orch.run_ticket("t1")
        with pytest.raises(TicketError, match="already ended"):
            orch.resume("t1")
        with pytest.raises(TicketError, match="never run"):
            orch.resume("t2")
        with pytest.raises(TicketError, match="no ticket 'zz'"):
            orch.resume("zz")


def test_missing_project_path_fails_clearly(tmp_path, project):
    llm = ScriptedAgentLLM([])
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent()) as orch:
        add_ticket(orch, project)
        project.rename(project.with_name("moved"))
        outcome = orch.run_ticket("t1")
    assert outcome.status == "failed" and "does not exist" in outcome.reason and llm.calls == []


class _BrokenObserver:
    """A plugin whose lifecycle hooks all raise ordinary exceptions."""

    def __init__(self):
        self.seen = []

    @hookimpl
    def on_ticket_start(self, ticket, run_id):
        self.seen.append("start")
        raise RuntimeError("observer bug")

    @hookimpl
    def on_turn_end(self, ticket, run_id, turn):
        self.seen.append(("turn", turn["turn_no"], turn["response"]))
        raise RuntimeError("observer bug")

    @hookimpl
    def on_ticket_complete(self, ticket, run_id, summary):
        self.seen.append(("complete", summary))
        raise RuntimeError("observer bug")


def test_lifecycle_hooks_see_the_run_and_a_raising_plugin_never_stops_it(tmp_path, project, caplog):
    from graph_helpers import _TestPlugin

    from orchestrator.plugins.manager import PluginRegistry
    from orchestrator.running.orchestrator import Orchestrator

    observer = _BrokenObserver()
    registry = PluginRegistry(load_entry_points=False, extra_plugins=(_TestPlugin(), observer))
    llm = ScriptedAgentLLM([plan_reply("p1"), decision_reply(True, "sum")])
    with Orchestrator(
        make_config(tmp_path), llm=llm, coding_agent=RecordingCodingAgent(["r1"]), registry=registry
    ) as orch:
        add_ticket(orch, project)
        assert orch.run_ticket("t1").status == "complete"
    assert observer.seen == ["start", ("turn", 1, "r1"), ("complete", "sum")]
    assert len([r for r in caplog.records if "the ticket goes on" in r.getMessage()]) == 3


class _TypeRecorder:
    """A well-behaved observer registered before the broken one: it must still be called."""

    def __init__(self):
        self.types: list[tuple[str, type]] = []

    @hookimpl(tryfirst=False)
    def on_ticket_start(self, ticket, run_id):
        self.types.append(("start", type(ticket)))

    @hookimpl
    def on_turn_end(self, ticket, run_id, turn):
        self.types.append(("turn", type(ticket)))

    @hookimpl
    def on_ticket_complete(self, ticket, run_id, summary):
        self.types.append(("complete", type(ticket)))


def test_other_plugins_still_run_after_one_raises_and_all_hooks_get_a_ticket(tmp_path, project):
    from graph_helpers import _TestPlugin

    from orchestrator.plugin_api import Ticket
    from orchestrator.plugins.manager import PluginRegistry
    from orchestrator.running.orchestrator import Orchestrator

    # pluggy calls the last registered first: the broken observer runs before the recorder.
    recorder, observer = _TypeRecorder(), _BrokenObserver()
    registry = PluginRegistry(load_entry_points=False, extra_plugins=(_TestPlugin(), recorder, observer))
    llm = ScriptedAgentLLM([plan_reply("p1"), decision_reply(True, "sum")])
    with Orchestrator(
        make_config(tmp_path), llm=llm, coding_agent=RecordingCodingAgent(["r1"]), registry=registry
    ) as orch:
        add_ticket(orch, project)
        assert orch.run_ticket("t1").status == "complete"
    assert observer.seen == ["start", ("turn", 1, "r1"), ("complete", "sum")]
    assert recorder.types == [("start", Ticket), ("turn", Ticket), ("complete", Ticket)]


def test_resume_of_a_run_whose_runner_died_before_its_first_checkpoint_starts_it_over(tmp_path, project):
    """A runner killed between the claim and the graph's first checkpoint left a `running` run
    with nothing in it: resume runs it from its input, under the same run."""
    import subprocess
    import sys

    from graph_helpers import add_ticket, make_config, make_orchestrator

    from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply

    dead = int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )
    llm = ScriptedAgentLLM([plan_reply("p"), decision_reply(True, "done")])
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent(["ok"])) as orch:
        add_ticket(orch, project)
        run_id = orch.store.claim_new_run("t1", ["pending"], pid=dead)
        assert run_id is not None
        outcome = orch.resume("t1")
        assert outcome.status == "complete" and outcome.run_id == run_id
        assert [r["id"] for r in orch.store.list_runs("t1")] == [run_id]


def test_a_node_whose_writes_were_saved_but_not_the_checkpoint_after_it_is_resumed(tmp_path, project):
    """The store went down between a node's saved writes and the next checkpoint (what a
    PostgreSQL outage mid-step leaves): the run has not ended, so resume continues it from
    those writes rather than calling it finished."""
    import sqlite3

    config = make_config(tmp_path)
    llm = ScriptedAgentLLM([plan_reply("p1"), decision_reply(False, next_prompt="p2")])

    def crash(prompt, cwd):
        raise Crash()

    with make_orchestrator(config, llm, RecordingCodingAgent(["r1", crash])) as orch:
        add_ticket(orch, project)
        with pytest.raises(Crash):
            orch.run_ticket("t1")
        run_id = orch.store.latest_run("t1")["id"]
        latest = orch.graph.get_state({"configurable": {"thread_id": run_id}}).config["configurable"]["checkpoint_id"]
    with sqlite3.connect(config.checkpoint_path) as db:  # the checkpoint after `assess` was never written
        db.execute("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?", (run_id, latest))
    llm2 = ScriptedAgentLLM([decision_reply(True, "done")])
    worker2 = RecordingCodingAgent(["r2"])
    with make_orchestrator(config, llm2, worker2) as orch:
        assert orch.resume("t1").status == "complete"
    assert worker2.prompts == ["p2"]  # assess's saved decision was used, turn 1 was not re-run
