"""`middle run ID` on a ticket whose earlier run left work (its branch's commits, an edited file,
an untracked note) refuses with one `error:` line naming `middle resume`, `middle feedback` and
`--fresh`, and keeps every file; `--fresh` is accepted by the command line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from test_next_steps import make_situation

from orchestrator.cli.main import main
from tickets.store import TicketStore


@pytest.fixture(autouse=True)
def _plain_invocation(monkeypatch):
    from orchestrator.lifecycle import next_steps
    monkeypatch.setattr(next_steps, "_STARTED_AS", {"config": None, "fake": False})


def test_run_of_a_failed_ticket_with_work_refuses_in_one_line_and_keeps_it(tmp_path, monkeypatch):
    from pathlib import Path

    make_situation("failed-work", tmp_path)  # the agent gave up after writing a.py (committed)
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as s:
        worktree = Path(s.latest_run("t")["worktree"])
        runs = len(s.list_runs("t"))
    (worktree / "a.py").write_text("x = 2  # my own fix\n")
    (worktree / "notes.md").write_text("what I tried\n")
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[agent]\nmax_turns = 3\n[memory]\nbackend = "none"\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", "t"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("warning: tickets:")]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output  # (and the no-ticket-folder warning)
    said = " ".join(result.output.split())
    for needle in ("`middle resume t`", "`middle feedback t", "`middle run t --fresh`", "uncommitted edits to a.py",
                   "untracked notes.md"):
        assert needle in said, result.output
    assert (worktree / "a.py").read_text() == "x = 2  # my own fix\n" and (worktree / "notes.md").is_file()
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as s:
        assert len(s.list_runs("t")) == runs
    assert "--fresh" in CliRunner().invoke(main, ["run", "--help"]).output
