"""How `middle run --parallel N` shows running tickets: whole ids, the same words piped or not."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from orchestrator.cli import batch_view
from orchestrator.cli.batch_view import LiveView, PrefixedView


def _terminal(width: int) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)


def test_the_live_view_never_cuts_an_id_and_cuts_the_message_instead():
    out = _terminal(60)
    view = LiveView(out)
    try:
        for tid in ("001-multiply-numbers", "003-divide-numbers"):
            view.started(SimpleNamespace(id=tid, title="a long title " * 20))
            view.say(tid, "the agent explains at length what it is about to do next " * 5)
        shown = _terminal(60)
        shown.print(view._table())
        lines = shown.file.getvalue().splitlines()
    finally:
        view.close()
    assert [line.split()[0] for line in lines] == ["001-multiply-numbers", "003-divide-numbers"]
    assert all(len(line) <= 60 and line.rstrip().endswith("…") for line in lines), lines


def test_a_started_ticket_reads_the_same_on_a_terminal_and_piped(monkeypatch):
    ticket = SimpleNamespace(id="001-mul", title="Multiply")
    out = _terminal(100)
    view = LiveView(out)
    try:
        view.started(ticket)
        shown = _terminal(100)
        shown.print(view._table())
    finally:
        view.close()
    piped = Console(file=io.StringIO(), width=100)
    monkeypatch.setattr(batch_view, "console", piped)
    PrefixedView().started(ticket)
    assert "started: Multiply" in shown.file.getvalue()
    assert "started: Multiply" in piped.file.getvalue()


def test_a_piped_batch_names_the_ticket_on_its_result_line_too(monkeypatch):
    from orchestrator.cli import output
    from orchestrator.running.outcome import RunOutcome

    piped = Console(file=io.StringIO(), width=200)
    monkeypatch.setattr(batch_view, "console", piped)
    monkeypatch.setattr(output, "console", piped)
    view = PrefixedView()
    view.finished(RunOutcome("001-mul", "r1", "complete", turns=2, cost_usd=0.5))
    view.finished(RunOutcome("002-div", "", "skipped", "waits for 001-mul"))
    lines = piped.file.getvalue().splitlines()
    assert lines == ["[001-mul] complete ticket 001-mul: 2 turn(s), $0.5000",
                     "[002-div] skipped ticket 002-div: waits for 001-mul"]


def test_feedback_kept_for_another_run_shows_no_turns_and_no_cost(monkeypatch):
    """Feedback a round started elsewhere took meanwhile (outcome "stored") once read
    `stored ticket t1: 0 turn(s), $0.0000 — ...`, even with --fake."""
    from orchestrator.cli import output
    from orchestrator.running.outcome import RunOutcome

    piped = Console(file=io.StringIO(), width=200)
    monkeypatch.setattr(output, "console", piped)
    output.report(RunOutcome("t1", "", "stored", "your feedback is kept for the round that runs it"))
    assert piped.file.getvalue().splitlines() == [
        "stored ticket t1: your feedback is kept for the round that runs it"]
