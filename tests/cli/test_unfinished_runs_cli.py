"""`middle run` and a ticket whose run is unfinished (interrupted, or its process died): the
backlog run says how to continue it, and naming it is refused at once, in one line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from test_next_steps import make_situation

from orchestrator.cli.main import main


@pytest.fixture(autouse=True)
def _plain_invocation(monkeypatch):
    from orchestrator.lifecycle import next_steps
    monkeypatch.setattr(next_steps, "_STARTED_AS", {"config": None, "fake": False})


def _project(tmp_path, monkeypatch, situation: str) -> None:
    make_situation(situation, tmp_path)
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[agent]\nmax_turns = 3\n[memory]\nbackend = "none"\n')
    (tmp_path / "tickets").mkdir(exist_ok=True)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("situation", ["interrupted", "stale"])
def test_a_backlog_run_with_only_unfinished_tickets_says_how_to_continue_them(tmp_path, monkeypatch, situation):
    _project(tmp_path, monkeypatch, situation)
    result = CliRunner().invoke(main, ["run", "--fake"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert (
        "no pending tickets" in text
        and "unfinished: t: " in text
        and "continue it with `middle resume t --fake`" in text
    )


@pytest.mark.parametrize("situation", ["interrupted", "stale"])
def test_running_an_unfinished_ticket_by_name_is_one_error_line(tmp_path, monkeypatch, situation):
    _project(tmp_path, monkeypatch, situation)
    result = CliRunner().invoke(main, ["run", "t"])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert "`middle resume t`" in result.output and "skipped" not in result.output
