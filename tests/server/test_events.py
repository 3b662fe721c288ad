"""Run events: JSON, the SSE stream (replay, Last-Event-ID, end of run), and `middle log --follow`."""

from __future__ import annotations

import io
import logging
import socket
import sqlite3
import subprocess
import sys
import threading
import time

from rich.console import Console
from server_helpers import read_sse

from orchestrator.cli.log_view import follow_log
from tickets.source import load_tickets
from tickets.store import TicketStore


def _run_with_events(store: TicketStore, ticket_id: str = "001-greeting") -> str:
    run_id = store.claim_new_run(ticket_id, ["pending"])
    assert run_id is not None
    store.add_event(run_id, ticket_id, "run_start", {"resume": False})
    store.add_event(run_id, ticket_id, "node", {"node": "plan", "phase": "start"})
    store.add_event(run_id, ticket_id, "coding_agent", {"type": "tool_use", "name": "Write",
                                                  "input": {"file_path": "/x/calc/a.py"}})
    return run_id


def _finish(store: TicketStore, run_id: str, ticket_id: str = "001-greeting") -> None:
    store.end_run(ticket_id, run_id, "failed", "Claude Code exited with code 1 (stderr: boom)")


def test_stream_replays_then_follows_and_ends_with_the_run(server):
    store = server.state.store
    server.state.sync_folder()
    run_id = _run_with_events(store)
    received: list = []

    def reader() -> None:
        received.extend(read_sse(server.client, f"/api/runs/{run_id}/stream"))

    thread = threading.Thread(target=reader)
    thread.start()
    # Written while the reader is connected: it must see these live, after the replay.
    store.add_event(run_id, "001-greeting", "decision", {"decision": {"complete": False}})
    _finish(store, run_id)
    thread.join(timeout=60)
    kinds = [name for name, _, _ in received]
    assert kinds == ["run_start", "node", "coding_agent", "decision", "run_end", "end"]
    assert received[2][1]["data"]["name"] == "Write" and received[-1][1]["status"] == "failed"
    ids = [int(i) for _, _, i in received[:-1]]
    assert ids == sorted(ids)

    again = read_sse(server.client, f"/api/runs/{run_id}/stream", headers={"Last-Event-ID": str(ids[2])})
    assert [name for name, _, _ in again] == ["decision", "run_end", "end"]
    after = read_sse(server.client, f"/api/runs/{run_id}/stream?after={ids[3]}")
    assert [name for name, _, _ in after] == ["run_end", "end"]

    listed = server.client.get("/api/tickets/001-greeting/events", params={"after": ids[0]}).json()
    assert [e["kind"] for e in listed] == ["node", "coding_agent", "decision", "run_end"]
    ticket_stream = read_sse(server.client, "/api/tickets/001-greeting/stream", until="run_end")
    assert ticket_stream[-1][0] == "run_end"
    board_stream = read_sse(server.client, "/api/events/stream?after=0", until="run_end")
    assert len(board_stream) == 5
    resumed = read_sse(server.client, "/api/events/stream", until="run_end",
                       headers={"Last-Event-ID": str(ids[2])})
    assert [name for name, _, _ in resumed] == ["decision", "run_end"]
    assert server.client.get("/api/runs/nope/stream").status_code == 404


def _wait_for_streams(server, count: int) -> None:
    """Until the server serves `count` live streams (it says so in /api/health)."""
    deadline = time.monotonic() + 60
    while server.client.get("/api/health").json()["live_streams"] != count:
        assert time.monotonic() < deadline, f"the server did not get to {count} live stream(s)"
        time.sleep(0.05)


def test_the_all_runs_stream_starts_now_without_after(server):
    store = server.state.store
    server.state.sync_folder()
    run_id = _run_with_events(store)
    history = store.last_event_id()
    received: list = []
    reader = threading.Thread(target=lambda: received.extend(
        read_sse(server.client, "/api/events/stream", until="note")))
    reader.start()
    _wait_for_streams(server, 1)  # connected: what is stored from here on is "new"
    store.add_event(run_id, "001-greeting", "note", {"text": "written after the board connected"})
    reader.join(timeout=60)
    assert [(name, data["data"].get("text")) for name, data, _ in received] == [
        ("note", "written after the board connected")]
    assert all(int(i) > history for _, _, i in received)


def _seed_events(db_path, run_id: str, ticket_id: str, n: int) -> None:
    """Many stored events at once, as a long history of another process's runs would be."""
    with sqlite3.connect(db_path) as conn:
        conn.executemany("INSERT INTO run_events (run_id, ticket_id, kind, data, at) VALUES (?, ?, ?, ?, ?)",
                         [(run_id, ticket_id, "note", '{"text": "%s"}' % ("x" * 100), "2026-01-01T00:00:00")
                          for _ in range(n)])


def test_a_stream_stops_when_its_client_leaves_and_logs_nothing(server, project, caplog):
    caplog.set_level(logging.WARNING)
    server.state.sync_folder()
    run_id = server.state.store.claim_new_run("001-greeting", ["pending"])
    assert run_id is not None
    _seed_events(project.db_path, run_id, "001-greeting", 20_000)
    host, port = server.url.split("//")[1].rsplit(":", 1)
    for _ in range(3):  # a client replaying a long history leaves in the middle of it
        with socket.create_connection((host, int(port))) as client:
            client.sendall(b"GET /api/events/stream?after=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           b"Accept: text/event-stream\r\n\r\n")
            got = 0
            while got < 300_000:
                chunk = client.recv(65536)
                assert chunk, "the stream ended before the client left"
                got += len(chunk)
        _wait_for_streams(server, 0)  # the server stopped that stream's generator
    sends = [r.getMessage() for r in caplog.records if "socket.send()" in r.getMessage()]
    assert sends == []


def _store_with_tickets(project) -> TicketStore:
    store = TicketStore(project.db_path)
    for ticket in load_tickets(project.resolve("tickets"), project.resolve("repo")).tickets:
        store.upsert_ticket(ticket)
    return store


def test_follow_log_waits_for_the_run_then_prints_its_events_as_they_arrive(project):
    store = _store_with_tickets(project)
    out = io.StringIO()
    polls: list[int] = []
    run_ids: list[str] = []

    def sleep(_seconds: float) -> None:  # each poll lets "the other process" take its next step
        polls.append(1)
        if len(polls) == 2:
            run_ids.append(_run_with_events(store))
        elif len(polls) == 3:
            _finish(store, run_ids[0])

    status = follow_log(Console(file=out, width=200, no_color=True), store, "001-greeting", sleep=sleep)
    text = out.getvalue()
    assert status == "failed"
    assert text.index("waiting for ticket 001-greeting") < text.index("run_start") < text.index("run_end")
    assert "Claude Code ▸ Write /x/calc/a.py" in text and "stderr: boom" in text
    store.close()


def test_middle_log_follow_cli_on_a_finished_run(project):
    store = _store_with_tickets(project)
    run_id = _run_with_events(store)
    _finish(store, run_id)
    store.close()
    result = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "--config", str(project.source),
                             "log", "001-greeting", "--follow"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"run {run_id}" in result.stdout and "run ended: failed" in result.stdout
    bad = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "--config", str(project.source),
                          "log", "nope", "--follow"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stderr.startswith("error: no ticket 'nope'")
