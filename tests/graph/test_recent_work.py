"""The "Memories invoked" block's two parts: the project's recent work, then related work from any time."""

from __future__ import annotations

import re

from graph_helpers import RecordedBackend, add_ticket, make_config, make_orchestrator

from orchestrator.config.settings import Config
from orchestrator.memory.format import (
    MEMORIES_HEADER,
    RECENT_HEADER,
    RELATED_HEADER,
    doc_id,
    format_block,
    memories_layout,
)
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply

OLD = "Ticket: Login form. Decided: sessions expire after 30 minutes of idle time (security review)."


def run_tickets(tmp_path, project, titles, config=None, before=()):
    replies = [r for i, _ in enumerate(titles) for r in (plan_reply(f"p{i}"), decision_reply(True, f"did {i}"))]
    llm = ScriptedAgentLLM(replies)
    config = config or make_config(tmp_path)
    with make_orchestrator(config, llm, RecordingCodingAgent(["ok"] * len(titles))) as orch:
        if before:
            orch.memory.index("demo", list(before))
        for i, title in enumerate(titles):
            add_ticket(orch, project, f"t{i}", title=title, description="session login work")
            assert orch.run_ticket(f"t{i}").status == "complete"
        docs = {f"t{i}": orch.store.memory_docs(f"t{i}") for i in range(len(titles))}
    return llm, docs


def test_recent_work_newest_first_then_related_without_repeats(tmp_path, project):
    llm, docs = run_tickets(tmp_path, project, ["Session cookie", "Session timeout", "Login page"],
                            before=[OLD])
    block = llm.user_messages[4].split("\n\n", 1)[0]  # ticket 3's plan
    lines = block.split("\n")
    assert lines[:2] == [MEMORIES_HEADER, RECENT_HEADER]
    # The two earlier tickets, newest first, dated; the imported-by-hand OLD doc is not a ticket.
    # Each memory carries its id (what the agent names in memories_used).
    assert re.fullmatch(r"- \d{4}-\d\d-\d\d " + re.escape(f"[{doc_id(docs['t1'][0])[:8]}] {docs['t1'][0]}"),
                        lines[2])
    assert re.fullmatch(r"- \d{4}-\d\d-\d\d " + re.escape(f"[{doc_id(docs['t0'][0])[:8]}] {docs['t0'][0]}"),
                        lines[3])
    # Related work: the ranked results, less what "Recent work" already shows.
    assert lines[4] == RELATED_HEADER and lines[5:] == [f"[{doc_id(OLD)[:8]}] {OLD}"]
    # One retrieve asking for num_to_retrieve more than the recent docs it leaves out.
    retrieves = [args for name, args in RecordedBackend.all_calls() if name == "retrieve"]
    assert retrieves[-2] == (["Login page. session login work"], 5 + 2)


def test_recent_tickets_zero_is_the_contracts_flat_block(tmp_path, project):
    config = make_config(tmp_path)
    config = Config(**{**config.model_dump(exclude={"root"}),
                       "memory": {**config.memory.model_dump(), "recent_tickets": 0}}, root=tmp_path)
    llm, docs = run_tickets(tmp_path, project, ["Session cookie", "Session timeout"], config=config)
    assert llm.user_messages[2].startswith(
        f"{MEMORIES_HEADER}\n[{doc_id(docs['t0'][0])[:8]}] {docs['t0'][0]}\n\n")
    retrieves = [args for name, args in RecordedBackend.all_calls() if name == "retrieve"]
    assert all(k == 5 for _, k in retrieves)


def test_memory_off_means_no_block_and_no_recent_work(tmp_path, project):
    llm, _ = run_tickets(tmp_path, project, ["Session cookie", "Session timeout"],
                         config=make_config(tmp_path, memory=False), before=())
    assert all(MEMORIES_HEADER not in m for m in llm.user_messages)


def test_block_fits_the_budget_and_recent_keeps_to_its_share():
    recent = [(f"Ticket: recent {i}. " + "r" * 300, f"2026-11-2{i}T10:00:00+00:00") for i in range(5)]
    related = [f"related {i} " + "x" * 300 for i in range(5)]
    for budget in (300, 800, 2000, 5000):
        block = format_block(recent, related, budget, 0.4)
        assert len(block) <= budget and block.startswith(MEMORIES_HEADER + "\n" + RECENT_HEADER)
        head = block.split("\n" + RELATED_HEADER)[0]
        assert len(head) <= int(budget * 0.4)
        assert "- 2026-11-20 Ticket: recent 0." in block  # the newest is always shown first
    # What recent work leaves of its share goes to related work.
    short = format_block([("Ticket: tiny.", "2026-11-20")], related, 2000, 0.4)
    assert short.count("related ") == 5
    # A recent doc is not repeated among the related ones.
    block = format_block([(related[0], "2026-11-20")], related, 5000, 0.4)
    assert block.count(related[0][:20]) == 1


def test_block_is_empty_without_memories_and_flat_without_recent_work():
    assert format_block([], [], 2000, 0.4) == ""
    assert format_block([], ["a", "b"], 2000, 0.4) == "".join(t for _, t in memories_layout(["a", "b"], 2000))
    assert format_block([("done it", "2026-01-02")], [], 2000, 0.4) == (
        f"{MEMORIES_HEADER}\n{RECENT_HEADER}\n- 2026-01-02 done it")
    # A share too small for one line leaves the block as the contract's flat list.
    assert format_block([("done it", "2026-01-02")], ["a"], 2000, 0.0) == f"{MEMORIES_HEADER}\na"


def test_a_recent_doc_left_out_for_want_of_room_stays_among_the_related():
    recent = [(f"Ticket: r{i}. " + "x" * 80, "2026-11-20") for i in range(5)]
    # A budget whose recent share holds two lines: the other three may still rank as related.
    block = format_block(recent, [recent[4][0], "other"], 500, 0.4, limit=5)
    assert block.count("Ticket: r") == 3 and "Ticket: r4." in block.split(RELATED_HEADER)[1]
    # `limit`: at most that many related docs, counted after the recent ones are left out.
    assert format_block(recent[:1], [recent[0][0], "a", "b", "c"], 2000, 0.4, limit=2).endswith(
        f"{RELATED_HEADER}\na\nb")


def test_recent_work_holds_ten_tickets_a_title_long_by_default(tmp_path):
    """Five recent tickets left the block below sliding_window's window on related earlier
    tickets (`middle bench tickets`, "(block)" rows); ten fit the default share, each line
    still a title long."""
    from orchestrator.memory.format import DEFAULT_RECENT_TICKETS

    assert make_config(tmp_path).memory.recent_tickets == DEFAULT_RECENT_TICKETS == 20
    recent = [(f"Ticket: {'a long ticket title ' * 10}{i}", "2024-01-01") for i in range(10)]
    lines = format_block(recent, []).split("\n")[2:]
    assert len(lines) == 10 and all(len(line) >= 70 for line in lines)
