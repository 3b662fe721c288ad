"""A run whose `middle` died on this machine (kill -9): `middle tickets` and `middle run` say so."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.config.settings import load_config
from orchestrator.running.sync import load
from orchestrator.testing import make_repo
from tickets.store import TicketStore


@pytest.fixture
def died(tmp_path, monkeypatch):
    """Ticket t1 left `running` under the claim of a process that no longer exists here."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MIDDLE_CONFIG", raising=False)
    from orchestrator.cli import main as cli
    monkeypatch.setattr(cli.console, "width", 250)
    make_repo(tmp_path / "repo")
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "t1.md").write_text("---\ntitle: One\nproject: demo\nid: t1\n---\nDo it.\n")
    (tmp_path / "middle.toml").write_text('[project]\nid = "demo"\npath = "repo"\n')
    config = load_config(tmp_path / "middle.toml", environ={})
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with TicketStore(config.db_path) as store:
        store.upsert_ticket(load(config).tickets[0])
        run_id = store.claim_new_run("t1", ["pending"], pid=dead.pid)
        assert run_id is not None
    return dead.pid, run_id


def test_tickets_shows_the_dead_run_interrupted_with_the_command_to_continue(died):
    pid, _ = died
    result = CliRunner().invoke(main, ["tickets"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if " t1 " in line)
    assert "interrupted" in row and "running" not in row
    assert f"its run died (pid {pid}): `middle resume t1`" in row
    assert " t1 " in CliRunner().invoke(main, ["tickets", "--status", "interrupted"]).output
    assert " t1 " not in CliRunner().invoke(main, ["tickets", "--status", "running"]).output


def test_run_says_plainly_that_the_previous_run_died(died):
    pid, run_id = died
    result = CliRunner().invoke(main, ["run", "--fake", "t1"])
    assert result.exit_code != 0
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert lines == [f"error: ticket 't1' (run {run_id}, pid {pid} on this machine): the process that "
                     "ran it is gone: continue it with `middle resume t1 --fake`"], result.output  # as it was run


def test_resume_rereads_a_ticket_without_a_project_line_as_run_did(died, tmp_path):
    """`middle run` took t1 into [project] id; `middle resume` reads its file again (for its
    check:) and must do the same, not refuse it for the `project:` line it never needed."""
    from orchestrator.running.refresh import current_ticket

    (tmp_path / "tickets" / "t1.md").write_text("---\ntitle: One\nid: t1\ncheck: [\"true\"]\n---\nDo it.\n")
    config = load_config(tmp_path / "middle.toml", environ={})
    with TicketStore(config.db_path) as store:
        ticket = current_ticket(store, "t1")
    assert ticket.project_id == "demo" and ticket.fields.get("check") == ["true"]


def test_log_shows_the_dead_run_interrupted_as_tickets_does(died):
    pid, run_id = died
    result = CliRunner().invoke(main, ["log", "t1"])
    assert result.exit_code == 0, result.output
    assert "[interrupted]" in result.output and "[running]" not in result.output
    assert f"its run died (pid {pid}): continue it with `middle resume t1`" in " ".join(result.output.split())
    assert f"run {run_id} interrupted" in result.output
