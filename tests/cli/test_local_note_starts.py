"""Every way turns start says once how to count a model at a local address free: `middle run`,
`resume`, `feedback`, `worker` as they open, and a run the server (or the Python API) starts, in
its log. One owner (Services.local_note_once): said once per process, whichever starts first.

The coding agent is aider following `[agent] provider = "openai-compatible"` to a local port
that accepts a connection and closes it (a server that is up, as a run asks before its first
turn: reachable.py, and fails every request): nothing is paid, and what a turn would do is not
what is looked at."""

from __future__ import annotations

import logging
import socket
import sys
import threading

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.config.settings import load_config
from orchestrator.services import Services
from tickets.source import load_tickets
from tickets.store import TicketStore

CONFIG = ('[project]\npath = "repo"\n[agent]\nprovider = "openai-compatible"\n'
          'base_url = "http://127.0.0.1:9/v1"\nmodel = "llama"\n[coding_agent]\nkind = "aider"\n')
NOTE = "served at a local address (http://127.0.0.1:9/v1): if it costs nothing, set price = {input = 0, output = 0}"


@pytest.fixture(autouse=True)
def _server(monkeypatch):
    """A server at CONFIG's base URL that closes each connection it accepts."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.close()

    serving = threading.Thread(target=serve, daemon=True)
    serving.start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "CONFIG", CONFIG.replace("http://127.0.0.1:9/v1", url))
    monkeypatch.setattr(module, "NOTE", NOTE.replace("http://127.0.0.1:9/v1", url))
    yield
    stop.set()
    serving.join()
    server.close()


def _project(project_dir, extra: str = "") -> None:
    (project_dir / "middle.toml").write_text(CONFIG + extra)
    (project_dir / "tickets" / "t1.md").write_text("---\ntitle: A\nproject: repo\n---\nWrite a.txt.\n")


def _flat(result) -> str:
    assert "Traceback" not in result.output, result.output
    return " ".join(result.output.split())


def test_resume_says_the_note_as_it_opens(project_dir):
    _project(project_dir)
    assert CliRunner().invoke(main, ["sync"]).exit_code == 0
    result = CliRunner().invoke(main, ["resume", "t1"])
    assert result.exit_code != 0  # it has never run: nothing to resume
    assert _flat(result).count(NOTE) == 1 and "note: aider: turns at aider's own cost" in _flat(result)
    _project(project_dir, '[coding_agent.options]\nprice = {input = 1, output = 1}\n')  # the user's price
    assert "local address" not in _flat(CliRunner().invoke(main, ["resume", "t1"]))


def test_feedback_says_the_note_as_its_round_opens(project_dir):
    _project(project_dir)
    assert CliRunner().invoke(main, ["sync"]).exit_code == 0
    with TicketStore(project_dir / ".middle" / "middle.sqlite3") as store:  # a run that ended complete
        run_id = store.claim_new_run("t1", ["pending"])
        assert run_id is not None
        store.end_run("t1", run_id, "complete")
    result = CliRunner().invoke(main, ["feedback", "t1", "also write b.txt"])
    assert _flat(result).count(NOTE) == 1, result.output


def test_worker_says_the_note_as_it_opens(project_dir):
    _project(project_dir)
    toml = (project_dir / "middle.toml").read_text().replace(
        '[project]\npath = "repo"\n', f'[project]\npath = "repo"\nrepo_url = "{project_dir / "repo"}"\n')
    (project_dir / "middle.toml").write_text(toml)
    (project_dir / "tickets" / "t1.md").unlink()  # nothing to work: only the start is looked at
    result = CliRunner().invoke(main, ["worker", "--once"])
    assert result.exit_code == 0, result.output
    assert _flat(result).count(NOTE) == 1, result.output


def test_fake_runs_say_no_note(project_dir):
    """Offline, every model is the fake: it costs nothing, so there is nothing to say."""
    _project(project_dir)
    (project_dir / "tickets" / "t1.md").unlink()
    assert "local address" not in _flat(CliRunner().invoke(main, ["run", "--fake"]))


def test_a_run_the_server_starts_logs_the_note_once(project_dir, caplog):
    """The server's runs (RunManager, one Orchestrator per run over shared Services) go through the
    driver: the first run's start logs it as a warning (what `middle serve` shows), the next not."""
    from orchestrator.server.background_runs import RunManager

    _project(project_dir)
    (project_dir / "tickets" / "t2.md").write_text("---\ntitle: B\nproject: repo\n---\nWrite b.txt.\n")
    config = load_config(project_dir / "middle.toml")
    svc = Services(config)
    try:
        for ticket in load_tickets(config.resolve("tickets"), config.resolve("repo")).tickets:
            svc.store.upsert_ticket(ticket)
        manager = RunManager(svc)
        with caplog.at_level(logging.WARNING, logger="middle.driver"):
            for tid in ("t1", "t2"):
                manager.start(tid)
                manager.join(60)
        notes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("note: ")]
        assert len(notes) == 1 and NOTE in notes[0], notes
    finally:
        svc.close()
