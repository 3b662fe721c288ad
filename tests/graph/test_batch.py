"""Batches: N tickets at once in their own worktrees, dependencies, the batch cost limit, a model
that cannot be used, and the graph's commit (the agent sees the changed paths)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from graph_helpers import add_ticket, make_config, make_orchestrator

from orchestrator.errors import ModelAccessError, TicketError
from orchestrator.running.batch import LogView, run_batch
from orchestrator.testing.fakes import PerTicketAgentLLM, RecordingCodingAgent, decision_reply, plan_reply
from orchestrator.workspace.git import branch_commit, out
from tickets.model import Ticket


def writes(rel: str, text: str, barrier: threading.Barrier | None = None):
    """A worker turn that writes one file in its cwd (optionally waiting for the other tickets)."""
    def turn(prompt: str, cwd: Path) -> str:
        if barrier is not None:
            barrier.wait(timeout=20)  # raises unless every ticket of the barrier runs at once
        (cwd / rel).write_text(text)
        return f"Created {rel}."
    return turn


def one_turn(title: str, summary: str = "done") -> dict[str, list[str]]:
    return {title: [plan_reply(f"write for {title}"), decision_reply(True, summary)]}


def test_two_tickets_run_at_once_each_on_its_own_branch(tmp_path, project):
    barrier = threading.Barrier(2)
    llm = PerTicketAgentLLM({**one_turn("Alpha"), **one_turn("Beta")})
    worker = RecordingCodingAgent([writes("shared_name.py", "x = 1\n", barrier),
                              writes("shared_name.py", "x = 2\n", barrier)])
    config = make_config(tmp_path)
    config.run.parallel = 2
    with make_orchestrator(config, llm, worker) as orch:
        add_ticket(orch, project, "a", title="Alpha")
        add_ticket(orch, project, "b", title="Beta")
        result = run_batch(orch, ["a", "b"])
        assert sorted(o.status for o in result.outcomes) == ["complete", "complete"]
        cwds = sorted(c["cwd"] for c in worker.calls)
        assert cwds == [str(tmp_path / "state" / "worktrees" / t) for t in ("a", "b")]
        for tid in ("a", "b"):
            run = orch.store.latest_run(tid)
            assert run["head_commit"] == branch_commit(project, f"middle/{tid}")
            assert run["changes"] == [{"path": "shared_name.py", "added": 1, "deleted": 0}]
            assert out(project, "show", f"middle/{tid}:shared_name.py") in ("x = 1", "x = 2")
        assert not (project / "shared_name.py").exists()  # the user's tree: untouched
    # the agent's assessment listed the changed path, so its summary can name it
    assess = [c["messages"][0]["content"] for c in llm.calls if "Decide whether" in c["messages"][0]["content"]]
    assert all("shared_name.py (+1 -0)" in m for m in assess) and len(assess) == 2


def test_a_dependency_on_a_complete_ticket_starts_from_its_branch(tmp_path, project):
    llm = PerTicketAgentLLM({**one_turn("Base"), **one_turn("On top")})
    seen: dict[str, bool] = {}

    def second(prompt: str, cwd: Path) -> str:
        seen["base file"] = (cwd / "base.py").exists()
        (cwd / "top.py").write_text("import base\n")
        return "Created top.py."

    worker = RecordingCodingAgent([writes("base.py", "B = 1\n"), second])
    config = make_config(tmp_path)
    config.run.parallel = 2
    config.run.dependencies = "complete"
    with make_orchestrator(config, llm, worker) as orch:
        add_ticket(orch, project, "base", title="Base")
        orch.store.upsert_ticket(Ticket(id="top", project_id="demo", title="On top", project_path=str(project),
                                        depends_on=["base"]))
        notes = Notes()
        result = run_batch(orch, ["top", "base"], view=notes)  # order in the list does not matter
        assert [o.ticket_id for o in result.outcomes] == ["base", "top"]
        assert all(o.status == "complete" for o in result.outcomes)
        start = orch.store.latest_run("top")["base_commit"]
        main = branch_commit(project, "main")
    assert seen["base file"] is True
    # the note names where the branch really started: not main's commit, main with base's branch
    said = [m for m in notes.said["top"] if m.startswith("working on branch")]
    assert said == [f"working on branch middle/top in {tmp_path / 'state' / 'worktrees' / 'top'} (from main "
                    f"with its dependencies' branches middle/base merged in, at {start[:10]})"]
    assert start != main and f"at {main[:10]})" in [m for m in notes.said["base"] if m.startswith("working")][0]


class Notes(LogView):
    """The batch's one-line notes, per ticket."""

    def __init__(self):
        self.said: dict[str, list[str]] = {}

    def say(self, ticket_id: str, msg: str) -> None:
        self.said.setdefault(ticket_id, []).append(msg)


def test_with_merged_dependencies_the_dependent_waits_for_the_merge(tmp_path, project):
    llm = PerTicketAgentLLM({**one_turn("Base"), **one_turn("On top")})
    config = make_config(tmp_path)
    with make_orchestrator(config, llm, RecordingCodingAgent([writes("base.py", "B = 1\n"),
                                                         writes("top.py", "T = 1\n")])) as orch:
        add_ticket(orch, project, "base", title="Base")
        orch.store.upsert_ticket(Ticket(id="top", project_id="demo", title="On top", project_path=str(project),
                                        depends_on=["base"]))
        first = run_batch(orch, ["base", "top"])
        assert [(o.ticket_id, o.status) for o in first.outcomes] == [("base", "complete"), ("top", "skipped")]
        assert "waits for base to be merged" in first.outcomes[1].reason
        orch.services.review.merge("base")
        second = run_batch(orch, ["top"])
        assert second.outcomes[0].status == "complete"
        assert orch.store.latest_run("top")["base_commit"] == orch.store.latest_run("base")["merge_commit"]


def test_a_ticket_that_waits_for_a_reverted_dependency_says_what_to_do_and_that_works(tmp_path, project):
    llm = PerTicketAgentLLM({**one_turn("Mul"), **one_turn("Mul"), **one_turn("Div")})
    llm.scripts["Mul"] += [plan_reply("again"), decision_reply(True, "again")]
    worker = RecordingCodingAgent([writes("mul.py", "M = 1\n"), writes("mul.py", "M = 2\n"),
                              writes("div.py", "D = 1\n")])
    with make_orchestrator(make_config(tmp_path), llm, worker) as orch:
        add_ticket(orch, project, "001-mul", title="Mul")
        orch.store.upsert_ticket(Ticket(id="002-div", project_id="demo", title="Div", project_path=str(project),
                                        depends_on=["001-mul"]))
        assert orch.run_ticket("001-mul").status == "complete"
        orch.merge("001-mul")
        orch.revert("001-mul")
        with pytest.raises(TicketError) as refused:
            run_batch(orch, ["002-div"], named=True)
        assert str(refused.value) == ("ticket '002-div' waits for 001-mul (reverted); for 001-mul: "
                                      "start it again with `middle run 001-mul`")
        assert orch.run_ticket("001-mul").status == "complete"  # what it said, then the next step
        with pytest.raises(TicketError, match="waits for 001-mul to be merged; for 001-mul: review it "
                                              "with `middle diff 001-mul`, then merge it"):
            run_batch(orch, ["002-div"], named=True)
        orch.merge("001-mul")
        assert run_batch(orch, ["002-div"], named=True).outcomes[0].status == "complete"


def test_the_batch_cost_limit_stops_starting_tickets(tmp_path, project):
    titles = ["One", "Two", "Three"]
    llm = PerTicketAgentLLM({k: v for t in titles for k, v in one_turn(t).items()})
    config = make_config(tmp_path)
    config.run.max_cost_usd_total = 0.015  # each turn costs 0.01
    with make_orchestrator(config, llm, RecordingCodingAgent(["a", "b", "c"], cost_per_turn=0.01)) as orch:
        for i, t in enumerate(titles):
            add_ticket(orch, project, f"t{i}", title=t)
        result = run_batch(orch, ["t0", "t1", "t2"])
        assert [o.status for o in result.outcomes] == ["complete", "complete", "skipped"]
        assert "max_cost_usd_total" in result.outcomes[2].reason and result.stopped
        assert orch.store.get_ticket("t2").status.value == "pending"


class RejectingLLM:
    def __init__(self):
        self.calls = 0

    def complete(self, system, messages, schema):
        self.calls += 1
        raise ModelAccessError("the Messages API rejected the API key (401): check ANTHROPIC_API_KEY")


def test_a_rejected_key_stops_the_batch_and_leaves_every_ticket_pending(tmp_path, project):
    llm = RejectingLLM()
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent()) as orch:
        for i in range(3):
            add_ticket(orch, project, f"t{i}", title=f"T{i}")
        result = run_batch(orch, ["t0", "t1", "t2"])
        assert isinstance(result.fatal, ModelAccessError)
        assert llm.calls == 1  # stopped at the first ticket
        assert [orch.store.get_ticket(f"t{i}").status.value for i in range(3)] == ["pending"] * 3
        assert orch.store.get_claim("t0") is None
        assert orch.store.latest_run("t0")["status"] == "failed"
        assert [o.status for o in result.outcomes] == ["pending"] * 3  # as the store says


def test_a_rejected_key_after_a_finished_turn_leaves_that_ticket_failed_and_resumable(tmp_path, project):
    def reject(system, messages):
        raise ModelAccessError("the Messages API rejected the API key (401): check ANTHROPIC_API_KEY")

    from orchestrator.testing.fakes import ScriptedAgentLLM

    llm = ScriptedAgentLLM([plan_reply("p"), reject])
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent([writes("a.py", "1\n")])) as orch:
        for i in range(2):
            add_ticket(orch, project, f"t{i}", title=f"T{i}")
        result = run_batch(orch, ["t0", "t1"])
        assert isinstance(result.fatal, ModelAccessError)
        assert [(o.status, orch.store.get_ticket(o.ticket_id).status.value) for o in result.outcomes] == [
            ("failed", "failed"), ("pending", "pending")]
        assert "rejected" not in result.outcomes[0].reason  # said once, by the batch's error
        assert "`middle resume t0`" in result.outcomes[0].reason


def test_a_rerun_of_a_complete_ticket_with_an_unmerged_change_is_refused(tmp_path, project):
    llm = PerTicketAgentLLM({"Alpha": [plan_reply("p"), decision_reply(True, "d")]})
    with make_orchestrator(make_config(tmp_path), llm, RecordingCodingAgent([writes("a.py", "1\n")])) as orch:
        add_ticket(orch, project, "a", title="Alpha")
        assert orch.run_ticket("a").status == "complete"
        with pytest.raises(Exception, match="unmerged change on middle/a: merge it .* or discard it"):
            orch.run_ticket("a", rerun=True)


def test_parallel_tickets_share_one_real_memory_store(tmp_path, project):
    from orchestrator.plugins.manager import PluginRegistry
    from orchestrator.running.orchestrator import Orchestrator

    titles = [f"Ticket {i}" for i in range(6)]
    llm = PerTicketAgentLLM({t: [plan_reply(t), decision_reply(True, f"summary of {t}")] for t in titles})
    config = make_config(tmp_path)
    config.memory.backend = "bm25"
    config.run.parallel = 3
    worker = RecordingCodingAgent([writes(f"f{i}.py", f"X = {i}\n") for i in range(6)])
    with Orchestrator(config, llm=llm, coding_agent=worker, registry=PluginRegistry(load_entry_points=False)) as orch:
        for i, t in enumerate(titles):
            add_ticket(orch, project, f"t{i}", title=t)
        result = run_batch(orch, [f"t{i}" for i in range(6)])
        assert [o.status for o in result.outcomes] == ["complete"] * 6
        docs = orch.memory.list_docs("demo")
        assert sorted(docs) == sorted(d for i in range(6) for d in orch.store.memory_docs(f"t{i}"))
        assert len(docs) == 6 and all(f"summary of Ticket {i}" in " ".join(docs) for i in range(6))


def test_a_store_outage_mid_run_interrupts_it_and_a_worker_continues_it(tmp_path, project, monkeypatch):
    from orchestrator.errors import StoreUnavailable

    llm = PerTicketAgentLLM({"Alpha": [plan_reply("p"), decision_reply(True, "d")]})
    config = make_config(tmp_path)
    config.run.retry_wait_s = 0  # due at once
    with make_orchestrator(config, llm, RecordingCodingAgent([writes("a.py", "1\n")])) as orch:
        add_ticket(orch, project, "a", title="Alpha")
        real = orch.store.finish_turn
        calls = []

        def flaky(*args, **kwargs):
            calls.append(1)
            if len(calls) == 1:
                raise StoreUnavailable("cannot reach the PostgreSQL store at postgresql://db (restarting)")
            return real(*args, **kwargs)

        monkeypatch.setattr(orch.store, "finish_turn", flaky)
        outcome = orch.run_ticket("a")
        assert outcome.status == "interrupted" and outcome.resumable
        assert orch.store.get_ticket("a").status.value == "interrupted"
        # No person stopped it: its first retry is due, and one worker takes it.
        assert orch.store.take_retry() == ("a", 1)
        assert orch.store.take_retry() is None
        assert orch.resume("a").status == "complete"
        assert orch.store.retry_of("a") == (0, None)


def test_a_ticket_a_person_interrupted_waits_for_that_person(tmp_path, project):
    config = make_config(tmp_path)
    config.run.retry_wait_s = 0
    with make_orchestrator(config, PerTicketAgentLLM({}), RecordingCodingAgent()) as orch:
        add_ticket(orch, project, "a", title="Alpha")
        run_id = orch.store.claim_new_run("a", ["pending"])
        assert run_id is not None
        orch.lifecycle.interrupt("a", run_id, "interrupted by the user")
        assert orch.store.take_retry() is None and orch.store.retry_of("a") == (0, None)


def test_a_store_out_of_reach_before_the_claim_skips_the_ticket_for_a_later_pass():
    from orchestrator.errors import CodingAgentError, StoreUnavailable
    from orchestrator.running.batch import BatchResult, LogView, _collect, _Slot

    result = BatchResult()
    _collect(_Slot("t1", error=StoreUnavailable("cannot reach the PostgreSQL store")), result, LogView(), [], False)
    _collect(_Slot("t2", error=CodingAgentError("Claude Code crashed")), result, LogView(), [], False)
    assert [(o.ticket_id, o.status) for o in result.outcomes] == [("t1", "skipped"), ("t2", "failed")]
    assert result.fatal is None


def test_a_long_title_makes_a_one_line_commit_subject_with_the_title_in_the_body(tmp_path, project):
    title = "Add the greeting" + " and more" * 1100  # ~10,000 characters
    llm = PerTicketAgentLLM(one_turn(title, "Created greet.py."))
    worker = RecordingCodingAgent([writes("greet.py", "print('hi')\n")])
    with make_orchestrator(make_config(tmp_path), llm, worker) as orch:
        add_ticket(orch, project, "long", title=title)
        assert run_batch(orch, ["long"]).outcomes[0].status == "complete"
    subject = out(project, "log", "-1", "--format=%s", "middle/long")
    assert len(subject) <= 72 and subject.startswith("Add the greeting and more")
    body = out(project, "log", "-1", "--format=%b", "middle/long")
    assert title in body and "Created greet.py." in body


def test_a_tickets_own_check_that_cannot_run_is_that_tickets_error_and_the_batch_goes_on(tmp_path, project):
    llm = PerTicketAgentLLM({**one_turn("Bad check"), **one_turn("Good")})
    coder = RecordingCodingAgent([writes("good.txt", "good\n")])
    with make_orchestrator(make_config(tmp_path), llm, coder) as orch:
        orch.store.upsert_ticket(Ticket(id="bad", project_id="demo", title="Bad check", project_path=str(project),
                                        fields={"check": ["no-such-test-runner --all"]}))
        orch.store.upsert_ticket(Ticket(id="good", project_id="demo", title="Good", project_path=str(project)))
        result = run_batch(orch, ["bad", "good"], parallel=1)
        assert result.fatal is None  # not a batch stopper: the model is fine
        by_id = {o.ticket_id: o for o in result.outcomes}
        assert by_id["good"].status == "complete"
        # The user's mistake, said as an error naming the ticket's own `check:`; the ticket is left pending.
        assert by_id["bad"].status == "skipped" and "its check command cannot run" in by_id["bad"].reason
        [error] = result.errors
        assert "cannot run on the base commit" in str(error) and "the `check:` of ticket bad" in str(error)
        assert "`middle run bad`" in str(error) and orch.store.get_ticket("bad").status.value == "pending"
