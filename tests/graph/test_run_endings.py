"""Both drivers of the ticket graph end a run that raised the same way: the runner (`middle run`,
`middle serve`, the Python API) and the LangGraph Server entry apply one policy per exception kind,
and record the same events."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from graph_helpers import _TestPlugin, add_ticket, make_config, make_orchestrator

from orchestrator.errors import (
    AgentReplyError,
    CheckCannotStart,
    MiddleError,
    ModelAccessError,
    RunInterrupted,
    StoreUnavailable,
)
from orchestrator.graph import build_graph
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.running.langgraph_entry import BoundServices, bind_services
from orchestrator.services import Services
from orchestrator.testing import make_repo
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, plan_reply
from tickets.model import Ticket


def raises(exc: BaseException) -> Callable[..., str]:
    def reply(*_args: Any) -> str:
        raise exc
    return reply


@dataclass
class Fault:
    """An exception raised mid-run, where it comes from, and how the run must end on both paths."""

    llm: list[Any]  # the middle agent's replies (a callable raises)
    run: str  # the run's status afterwards
    ticket: str  # the ticket's status afterwards
    reason: str  # in the run's reason
    raised: type[BaseException] | None  # what the runner raises (None: it returns an outcome)
    store_fails: bool = False  # the store's start_turn raises StoreUnavailable
    auto_resume: bool = False


FAULTS = {
    "store-unavailable": Fault(
        [plan_reply("p")], "interrupted", "interrupted", "the store was out of reach", None,
        store_fails=True, auto_resume=True),
    "model-access-before-any-turn": Fault(
        [raises(ModelAccessError("the Messages API rejected the API key (401)"))],
        "failed", "pending", "rejected the API key", ModelAccessError),
    "model-access-after-a-turn": Fault(
        [plan_reply("p"), raises(ModelAccessError("the Messages API rejected the API key (401)"))],
        "failed", "failed", "rejected the API key", ModelAccessError),
    "check-cannot-start-before-any-turn": Fault(  # the user's check command is wrong: left pending
        [raises(CheckCannotStart("check `x` cannot run on the base commit (exit 127)"))],
        "failed", "pending", "cannot run on the base commit", CheckCannotStart),
    "middle-error": Fault(
        [raises(AgentReplyError("the middle agent gave no usable decision"))],
        "failed", "failed", "no usable decision", None),
    "run-interrupted": Fault(
        [raises(RunInterrupted("stopped by SIGTERM"))], "interrupted", "interrupted", "stopped by SIGTERM",
        RunInterrupted),
    "keyboard-interrupt": Fault(
        [raises(KeyboardInterrupt())], "interrupted", "interrupted", "interrupted by the user", KeyboardInterrupt),
    "plain-bug": Fault(
        [raises(RuntimeError("unexpected bug"))], "failed", "failed",
        "internal error: RuntimeError: unexpected bug", RuntimeError),
}


def failing_start_turn(*_args: Any, **_kwargs: Any) -> None:
    raise StoreUnavailable("cannot reach the PostgreSQL store at postgresql://db (restarting)")


def ticket(project: Path) -> Ticket:
    return Ticket(id="t1", project_id="demo", title="Add hello", description="Create hello.py",
                  project_path=str(project))


def via_runner(config: Any, project: Path, fault: Fault, monkeypatch: Any) -> tuple[Any, BaseException | None]:
    orch = make_orchestrator(config, ScriptedAgentLLM(fault.llm), RecordingCodingAgent())
    add_ticket(orch, project)
    if fault.store_fails:
        monkeypatch.setattr(orch.store, "start_turn", failing_start_turn)
    try:
        outcome = orch.run_ticket("t1")
    except BaseException as exc:
        return orch, exc
    assert (outcome.status, outcome.resumable) == (fault.run, True)
    return orch, None


def via_langgraph(config: Any, project: Path, fault: Fault, monkeypatch: Any) -> tuple[Any, BaseException | None]:
    (config.root / "tickets").mkdir()  # the entry syncs the ticket folder before its claim
    registry = PluginRegistry(load_entry_points=False, extra_plugins=(_TestPlugin(),))
    services = Services(config, llm=ScriptedAgentLLM(fault.llm), coding_agent=RecordingCodingAgent(), registry=registry)
    services.store.upsert_ticket(ticket(project))
    if fault.store_fails:
        monkeypatch.setattr(services.store, "start_turn", failing_start_turn)
    graph = bind_services(build_graph(), BoundServices(services=services)).compile()
    try:
        graph.invoke({"ticket_id": "t1"})
    except BaseException as exc:
        return services, exc
    return services, None


def trace(store: Any, run_id: str) -> list[tuple[str, str | None, str | None, bool]]:
    """The run's events as kinds, nodes and phases (what `middle log` shows), without their times."""
    return [(e["kind"], e["data"].get("node"), e["data"].get("phase"), "error" in e["data"])
            for e in store.list_events(run_id=run_id)]


@pytest.mark.parametrize("kind", list(FAULTS))
def test_both_drivers_end_a_run_that_raised_the_same_way(kind, tmp_path, monkeypatch):
    fault = FAULTS[kind]
    traces = []
    for name, drive in (("runner", via_runner), ("langgraph", via_langgraph)):
        project = make_repo(tmp_path / name / "repo", {"README.md": "sample\n"})
        config = make_config(tmp_path / name, memory=False)
        owner, raised = drive(config, project, fault, monkeypatch)
        try:
            store = owner.store
            if name == "runner":  # what it returns as an outcome, it does not raise
                assert (type(raised) is fault.raised) if fault.raised else (raised is None), raised
            else:  # LangGraph Server shows every exception; the store says how the run ended
                assert raised is not None and isinstance(raised, fault.raised or MiddleError), raised
            run = store.latest_run("t1")
            assert run["status"] == fault.run, (name, run)
            assert fault.reason in run["reason"], (name, run["reason"])
            assert store.get_ticket("t1").status.value == fault.ticket, name
            assert store.get_claim("t1") is None, name  # no run is left holding the ticket
            ends = [e for e in store.list_events(run_id=run["id"]) if e["kind"] == "run_end"]
            assert len(ends) == 1 and ends[0]["data"]["status"] == fault.run, name
            assert bool(ends[0]["data"].get("auto_resume")) == fault.auto_resume, (name, ends[0]["data"])
            traces.append(trace(store, run["id"]))
        finally:
            owner.close()
    assert traces[0] == traces[1]  # one way of recording the run's events



def test_both_drivers_refuse_a_claimed_ticket_with_the_same_words(tmp_path):
    """One claim for both paths: the LangGraph entry said only "running or claimed by another run"."""
    from orchestrator.errors import TicketError

    project = make_repo(tmp_path / "repo", {"README.md": "sample\n"})
    config = make_config(tmp_path, memory=False)
    (tmp_path / "tickets").mkdir()
    with make_orchestrator(config, ScriptedAgentLLM([]), RecordingCodingAgent()) as orch:
        add_ticket(orch, project)
        run_id = orch.store.claim_new_run("t1", ["pending"])  # this process holds it, alive
        with pytest.raises(TicketError) as by_runner:
            orch.run_ticket("t1")
        graph = bind_services(build_graph(), BoundServices(services=orch.services)).compile()
        with pytest.raises(TicketError) as by_entry:
            graph.invoke({"ticket_id": "t1"})
        assert str(by_entry.value) == str(by_runner.value)
        assert "is being worked by" in str(by_runner.value)
        assert [r["id"] for r in orch.store.list_runs("t1")] == [run_id]  # nothing new claimed
