"""The worker's queue: bounded retries of passing failures (a Claude Code turn that crashed), with
growing waits and said in its output, and none for a failed check or the agent's "failed"."""

from __future__ import annotations

from graph_helpers import _TestPlugin, add_ticket, make_config

from orchestrator.coding_agent.base import TurnResult
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.running.batch import LogView
from orchestrator.running.fleet import work
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing.fakes import PerTicketAgentLLM, RecordingCodingAgent, plan_reply


class Said(LogView):
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def say(self, ticket_id: str, msg: str) -> None:
        self.lines.append((ticket_id, msg))


def crashed(prompt, cwd):
    return TurnResult(session_id=None, text="", is_error=True, error="Claude Code exited with code 137",
                      exit_code=137)


def _worker(tmp_path, project, llm, agent, **run):
    config = make_config(tmp_path)
    for key, value in run.items():
        setattr(config.run, key, value)
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
