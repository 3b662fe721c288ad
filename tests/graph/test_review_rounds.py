"""Review rounds (`middle feedback`) through the real graph, store, checkpoints and git worktrees,
with the scripted middle agent and the recording worker: the round continues the branch and the
Claude Code session, the agent reads the human's words, each round has its own limits, and the
memory doc keeps the feedback as the human's decision."""

from __future__ import annotations

import subprocess

import pytest
from graph_helpers import RecordedBackend, add_ticket, make_config, make_orchestrator

from orchestrator.errors import TicketError
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from orchestrator.workspace.git import out


def write(name: str, text: str):
    def act(prompt, cwd):
        (cwd / name).write_text(text)
        return f"Wrote {name}."
    return act


def _log(store) -> str:
    import io

    from rich.console import Console

    from orchestrator.cli.log_view import print_log

    buf = io.StringIO()
    print_log(Console(file=buf, width=200), store, "t1")
    return buf.getvalue()


def first_round(tmp_path, project, worker_script, agent_replies, **agent):
    cfg = make_config(tmp_path, **agent)
    llm = ScriptedAgentLLM([plan_reply("Create hello.py"), decision_reply(True, "Added hello.py."), *agent_replies])
    worker = RecordingCodingAgent([write("hello.py", "print('hi')\n"), *worker_script])
    orch = make_orchestrator(cfg, llm, worker)
    add_ticket(orch, project)
    assert orch.run_ticket("t1").status == "complete"
    return orch, llm, worker


def test_feedback_continues_the_ticket_on_its_branch_and_session(tmp_path, project):
    orch, llm, worker = first_round(
        tmp_path, project, [write("empty.py", "EMPTY = ''\n")],
        [plan_reply("Also handle empty input in empty.py"), decision_reply(True, "Handled empty input.")])
    with orch:
        first = orch.store.latest_run("t1")
        outcome = orch.feedback("t1", "also handle empty input")
        assert outcome.status == "complete", outcome.reason
        runs = orch.store.list_runs("t1")
        assert len(runs) == 2 and orch.store.round_of(runs[1]["id"]) == 2
        # the middle agent read the human's words with the ticket's history
        revise = llm.user_messages[2]
        assert "also handle empty input" in revise and "Added hello.py." in revise and "Create hello.py" in revise
        assert "Earlier rounds" in llm.user_messages[3]  # the round's assess sees the history too
        # Claude Code resumed the first round's session, in the same worktree
        call = worker.calls[1]
        assert call["resume"] is True and call["session_id"] == worker.calls[0]["session_id"]
        assert call["cwd"] == worker.calls[0]["cwd"] and call["prompt"] == "Also handle empty input in empty.py"
        # one branch, both rounds' commits; the diff is the whole change since the ticket's start
        assert runs[1]["branch"] == first["branch"] and runs[1]["base_commit"] == first["base_commit"]
        log = out(project, "log", "--format=%s", "middle/t1").splitlines()
        assert len(log) == 3  # the sample commit, round 1, round 2
        diff = orch.diff("t1")
        assert {f["path"] for f in diff["files"]} == {"hello.py", "empty.py"}
        # memory: one doc for the ticket, with the human's feedback as their decision
        docs = orch.store.memory_docs("t1")
        assert len(docs) == 1
        assert "The human's review: also handle empty input." in docs[0]
        assert "Added hello.py." in docs[0] and "Round 2: Handled empty input." in docs[0]
        assert len(orch.store.memory_docs("t1", include_deleted=True)) == 2
        assert any(c[0] == "delete" for c in RecordedBackend.all_calls())  # the round-1 doc left memory
        assert orch.store.get_ticket("t1").status.value == "complete"


def test_each_round_has_its_own_turn_limit_and_any_number_of_rounds(tmp_path, project):
    orch, llm, worker = first_round(
        tmp_path, project, ["looked", "looked again", write("c.py", "C = 3\n")],
        [plan_reply("Look"), decision_reply(False, next_prompt="Look again"),
         decision_reply(False, next_prompt="Look once more"),
         plan_reply("Write c.py"), decision_reply(True, "Wrote c.py.")], max_turns=2)
    with orch:
        failed = orch.feedback("t1", "look at it")
        assert failed.status == "failed" and "turn limit" in failed.reason and failed.turns == 2
        # a round that failed for good: the next feedback starts another round on the branch,
        # which still holds round 1's work
        third = orch.feedback("t1", "write c.py")
        assert third.status == "complete" and third.turns == 1
        assert [orch.store.round_of(r["id"]) for r in orch.store.list_runs("t1")] == [1, 2, 3]


def test_feedback_while_running_reaches_the_next_assess(tmp_path, project):
    cfg = make_config(tmp_path)
    holder = {}

    def turn_one(prompt, cwd):
        (cwd / "hello.py").write_text("print('hi')\n")
        result = holder["orch"].feedback("t1", "use logging, not print")  # from the same store
        assert result.status == "stored" and "next assessment" in result.reason
        return "Wrote hello.py."

    llm = ScriptedAgentLLM([plan_reply("Create hello.py"),
                            decision_reply(False, next_prompt="Use logging instead of print"),
                            decision_reply(True, "Added hello.py with logging.")])
    worker = RecordingCodingAgent([turn_one, write("hello.py", "import logging\n")])
    with make_orchestrator(cfg, llm, worker) as orch:
        holder["orch"] = orch
        add_ticket(orch, project)
        assert orch.run_ticket("t1").status == "complete"
        first_assess, second_assess = llm.user_messages[1], llm.user_messages[2]
        assert "use logging, not print" in first_assess
        assert "use logging, not print" not in second_assess  # delivered once
        turns = orch.store.list_turns(ticket_id="t1")
        assert turns[0]["decision"]["feedback"] == ["use logging, not print"]
        log = _log(orch.store)
        assert "feedback while running" in log and "use logging, not print" in log and "not read" not in log
        assert "The human's review: use logging, not print." in orch.store.memory_docs("t1")[0]


def test_feedback_after_the_last_assess_opens_the_next_round_at_once(tmp_path, project):
    """Words that reach a run after its last assessment (here: while it commits) are not left
    with a finished run: the runner opens the next round with them before it returns."""
    cfg = make_config(tmp_path)
    llm = ScriptedAgentLLM([plan_reply("Create hello.py"), decision_reply(True, "Added hello.py."),
                            plan_reply("Rename it to b.py"), decision_reply(True, "Renamed it.")])
    worker = RecordingCodingAgent([write("hello.py", "print('hi')\n"), write("b.py", "print('hi')\n")])
    with make_orchestrator(cfg, llm, worker) as orch:
        add_ticket(orch, project)
        commit, sent = orch.worktrees.commit, []

        def committing(ws, message):  # the human's words arrive while round 1 commits
            if not sent:
                sent.append(orch.store.add_feedback("t1", orch.store.latest_run("t1")["id"], "name it b.py"))
            return commit(ws, message)

        orch.worktrees.commit = committing
        outcome = orch.run_ticket("t1")
        assert sent[0] is not None and outcome.status == "complete", outcome.reason
        runs = orch.store.list_runs("t1")
        assert [orch.store.round_of(r["id"]) for r in runs] == [1, 2] and outcome.run_id == runs[1]["id"]
        assert "name it b.py" in llm.user_messages[2]  # round 2's revise read them, once
        assert sum("name it b.py" in m for m in llm.user_messages) == 2  # and its assess's history
        assert "came after the run's last assessment: round 2 opened with it" in _log(orch.store)


def test_the_next_round_opens_with_words_the_last_one_missed(tmp_path, project):
    orch, llm, worker = first_round(tmp_path, project, [write("b.py", "B = 1\n")],
                                    [plan_reply("Write b.py"), decision_reply(True, "Wrote b.py.")])
    with orch:
        # (what a runner killed right after its run's end leaves: words its run never read)
        run = orch.store.latest_run("t1")
        with orch.store._write() as conn:
            conn.execute("INSERT INTO run_events (run_id, ticket_id, kind, data, at) VALUES (?, 't1', 'feedback',"
                         " '{\"text\": \"name it b.py\"}', '2026-01-01T00:00:00+00:00')", (run["id"],))
        assert "the ticket's next round opens with it" in _log(orch.store)
        assert orch.feedback("t1", "and keep it short").status == "complete"
        assert "name it b.py" in llm.user_messages[2] and "and keep it short" in llm.user_messages[2]


@pytest.mark.parametrize("how", ["unknown", "never ran", "merged", "discarded", "reverted", "empty", "blank"])
def test_feedback_is_refused_with_one_line_and_nothing_changed(tmp_path, project, how):
    cfg = make_config(tmp_path)
    llm = ScriptedAgentLLM([plan_reply("Create hello.py"), decision_reply(True, "Added hello.py.")])
    with make_orchestrator(cfg, llm, RecordingCodingAgent([write("hello.py", "x\n")])) as orch:
        add_ticket(orch, project)
        if how not in ("unknown", "never ran"):
            orch.run_ticket("t1")
        if how in ("merged", "reverted"):
            orch.merge("t1")
        if how == "discarded":
            orch.discard("t1")
        if how == "reverted":
            orch.revert("t1")
        before = (orch.store.get_ticket("t1"), orch.store.list_runs("t1"),
                  orch.store.list_events(ticket_id="t1"), out(project, "for-each-ref"))
        with pytest.raises(TicketError) as err:
            orch.feedback("nosuch" if how == "unknown" else "t1",
                          {"empty": "", "blank": "  \n "}.get(how, "change it"))
        message = str(err.value)
        assert "\n" not in message
        assert {"unknown": "no ticket 'nosuch'", "never ran": "has never run", "merged": "is merged",
                "discarded": "is discarded", "reverted": "is reverted", "empty": "is empty",
                "blank": "is empty"}[how] in message
        if how in ("merged", "discarded", "reverted", "never ran"):
            assert "`middle " in message  # what to do instead, from the one table
        assert (orch.store.get_ticket("t1"), orch.store.list_runs("t1"),
                orch.store.list_events(ticket_id="t1"), out(project, "for-each-ref")) == before


def test_a_conflicted_ticket_is_told_why_and_merges_after_its_round(tmp_path, project):
    cfg = make_config(tmp_path)
    llm = ScriptedAgentLLM([plan_reply("Rewrite README.md"), decision_reply(True, "README says theirs."),
                            plan_reply("Make README.md say ours"), decision_reply(True, "README matches main.")])
    worker = RecordingCodingAgent([write("README.md", "theirs\n"), write("README.md", "ours\n")])
    with make_orchestrator(cfg, llm, worker) as orch:
        add_ticket(orch, project)
        assert orch.run_ticket("t1").status == "complete"
        (project / "README.md").write_text("ours\n")
        subprocess.run(["git", "commit", "-qam", "ours"], cwd=project, check=True)
        assert orch.merge("t1").status == "conflict"
        assert orch.feedback("t1", "keep README.md as main has it").status == "complete"
        assert "conflicts in README.md" in llm.user_messages[2]
        assert worker.calls[1]["resume"] is True
        assert orch.merge("t1").status == "merged"
        assert (project / "README.md").read_text() == "ours\n"


def test_log_follow_describes_feedback_events():
    from orchestrator.cli.log_view import describe_event

    assert describe_event({"kind": "feedback", "data": {"text": "x", "round": 2}}) == "round 2: the human's feedback: x"
    assert describe_event({"kind": "feedback", "data": {"text": "y"}}) == "the human's feedback: y"


def test_a_round_that_changes_nothing_says_so_not_the_earlier_rounds_count(tmp_path, project):
    orch, llm, worker = first_round(
        tmp_path, project, ["It already handles that; nothing to change."],
        [plan_reply("Check hello.py handles empty input"), decision_reply(True, "Already handled.")])
    with orch:
        assert orch.feedback("t1", "does it handle empty input?").status == "complete"
        first, second = orch.store.list_runs("t1")
        notes = [e["data"].get("text", "") for e in orch.store.list_events(run_id=second["id"]) if e["kind"] == "note"]
        assert any(n.startswith("this round changed no files: middle/t1 stays at "
                                f"{first['head_commit'][:10]}") for n in notes), notes
        assert not any(n.startswith("committed") for n in notes), notes
        assert second["head_commit"] == first["head_commit"]
        assert [f["path"] for f in orch.diff("t1")["files"]] == ["hello.py"]  # round 1's work, still there
