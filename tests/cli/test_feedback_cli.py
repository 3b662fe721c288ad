"""`middle feedback` refuses what it cannot do with one `error:` line, a non-zero exit and nothing
changed; each refusal says what to do instead (from the one table of next steps)."""

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


def snapshot(tmp_path):
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as s:
        return (s.get_ticket("t").status, s.list_runs("t"), s.list_events(ticket_id="t"), s.memory_docs("t", True))


@pytest.mark.parametrize("sit, args, says", [
    ("pending", ("t", "change it"), ["has never run", "`middle run t`"]),
    ("merged", ("t", "change it"), ["is merged", "`middle run --rerun t`"]),
    ("discarded", ("t", "change it"), ["is discarded", "`middle run t`"]),
    ("reverted", ("t", "change it"), ["is reverted", "`middle run t`"]),
    ("failed", ("t", "change it"), ["is failed", "`middle run t`"]),
    ("complete", ("t", "  "), ["is empty"]),
    ("complete", ("nosuch", "change it"), ["no ticket 'nosuch'"]),
])
def test_refusals_are_one_line_and_change_nothing(tmp_path, monkeypatch, sit, args, says):
    make_situation(sit, tmp_path)
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[agent]\nmax_turns = 3\n[memory]\nbackend = "none"\n')
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    result = CliRunner().invoke(main, ["feedback", *args])
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for needle in says:
        assert needle in " ".join(result.output.split()), result.output
    assert snapshot(tmp_path) == before


def test_a_removed_worktree_whose_branch_is_gone_and_never_pushed_is_one_error_line(tmp_path, monkeypatch):
    """The ticket's worktree and branch are gone and no shared repository holds it: a round
    cannot continue it (it would from either; see tests/graph/test_rounds_anywhere.py)."""
    import subprocess

    make_situation("complete", tmp_path)
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as s:
        worktree = s.latest_run("t")["worktree"]
    subprocess.run(["git", "worktree", "remove", "--force", worktree], cwd=tmp_path / "repo", check=True)
    subprocess.run(["git", "branch", "--quiet", "-D", "middle/t"], cwd=tmp_path / "repo", check=True)
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[agent]\nmax_turns = 3\n[memory]\nbackend = "none"\n')
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    result = CliRunner().invoke(main, ["feedback", "t", "change it"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    text = " ".join(result.output.split())
    assert "is not on this machine" in text and "its branch middle/t is not here either" in text, text
    assert "`middle run --rerun t`" in text
    assert "give the feedback on the machine that ran it" in text
    assert snapshot(tmp_path) == before
