"""A fleet of `middle worker` processes on one PostgreSQL store (fleet_helpers.py) meeting
failures: a worker killed mid-ticket is taken over, a dead machine's run is taken over in another
clone, a PostgreSQL restart mid-run and an outage past the store's retry are survived.
(Split from test_fleet.py so the two run on different workers: each is minutes long.)"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import pytest
from fleet_helpers import (
    check_all_ran_once_in_order,
    fleet,
    kill_group,
    pids_under,
    start_worker,
    wait_inside_a_turn,
    wait_lease_out,
)

from orchestrator.workspace.git import out
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow, pytest.mark.postgres]


def test_a_killed_workers_ticket_is_taken_over_and_finishes_once(tmp_path, claude_cli, pg_url):
    """kill -9 leaves the claim in the store; on this machine the claim is dead at once (its pid
    is gone), on another after the lease (claim_is_live is unit-tested for both)."""
    tickets = {i: [] for i in range(6)}
    remote, desk = fleet(tmp_path, claude_cli, pg_url, tickets, lease_s=8)
    doomed = start_worker(tmp_path, desk, "doomed", "--parallel", "1")
    try:
        victim = wait_inside_a_turn(pg_url)
    finally:
        kill_group(doomed)  # kill -9: no chance to release its claim
        for pid in pids_under(tmp_path / "doomed"):
            os.kill(pid, signal.SIGKILL)
    doomed.wait(30)
    with TicketStore(pg_url) as store:
        assert store.get_ticket(victim).status.value == "running" and store.get_claim(victim) is not None
    survivor = start_worker(tmp_path, desk, "survivor", "--once", "--parallel", "2")
    out_ = survivor.communicate(timeout=600)[0]
    assert survivor.returncode == 0, out_
    with TicketStore(pg_url) as store:
        runs = store.list_runs(victim)
        assert len(runs) == 1 and runs[0]["status"] == "complete", runs  # continued, never restarted
        assert all(len(store.list_runs(f"t{i:02d}")) == 1 for i in tickets)
        assert all(store.get_ticket(f"t{i:02d}").status.value == "complete" for i in tickets)


def test_a_postgresql_restart_mid_run_is_survived(tmp_path, claude_cli, pg_server, pg_url):
    tickets = {i: ([i - 1] if i % 3 == 2 else []) for i in range(9)}
    remote, desk = fleet(tmp_path, claude_cli, pg_url, tickets)
    procs = [start_worker(tmp_path, desk, f"w{k}", "--once", "--parallel", "2") for k in range(2)]
    restarted = threading.Event()

    def restart_when_busy() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with TicketStore(pg_url) as store:
                if store.list_tickets(status="complete") and store.list_tickets(status="running"):
                    break
            time.sleep(0.1)
        pg_server.restart()
        restarted.set()

    thread = threading.Thread(target=restart_when_busy)
    thread.start()
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    thread.join(60)
    assert restarted.is_set()
    print(*outputs, sep="\n----\n")  # shown by pytest when the test fails
    assert all(p.returncode == 0 for p in procs), [p.returncode for p in procs]
    try:
        check_all_ran_once_in_order(pg_url, remote, tickets)
    except AssertionError:
        print(*outputs, sep="\n----\n")
        raise


def test_a_dead_machines_run_is_taken_over_in_another_clone_when_its_directory_is_gone(tmp_path, claude_cli, pg_url):
    """Two machines (MIDDLE_HOSTNAME): the first dies mid-turn and its whole directory goes with
    it; the second recreates the run's worktree in its own clone and finishes the same run."""
    tickets = {i: [] for i in range(3)}
    remote, desk = fleet(tmp_path, claude_cli, pg_url, tickets, lease_s=6)
    doomed = start_worker(tmp_path, desk, "machine-a", "--parallel", "1", host="machine-a")
    try:
        victim = wait_inside_a_turn(pg_url)
    finally:
        kill_group(doomed)
        for pid in pids_under(tmp_path / "machine-a"):
            os.kill(pid, signal.SIGKILL)
    doomed.wait(30)
    shutil.rmtree(tmp_path / "machine-a")  # the dead machine's disk is gone with it
    with TicketStore(pg_url) as store:
        begun_in = store.latest_run(victim)["worktree"]
        assert begun_in.startswith(str(tmp_path / "machine-a"))
    # Machine B's `--once` worker takes over only a claim whose lease ran out (another host's
    # process cannot be checked): start it after that, not after a guess at the time it takes.
    wait_lease_out(pg_url, victim)
    survivor = start_worker(tmp_path, desk, "machine-b", "--once", "--parallel", "2", host="machine-b")
    output = survivor.communicate(timeout=600)[0]
    assert survivor.returncode == 0 and "Traceback" not in output, output
    assert f"took over the run begun in {begun_in}" in output, output
    with TicketStore(pg_url) as store:
        runs = store.list_runs(victim)
        assert [r["status"] for r in runs] == ["complete"], runs  # continued, never restarted
        assert runs[0]["worktree"].startswith(str(tmp_path / "machine-b"))
        assert all(store.get_ticket(f"t{i:02d}").status.value == "complete" for i in tickets)
    n = int(victim[1:])
    assert out(remote, "show", f"middle/{victim}:calc/m{n:02d}.py") == f"VALUE = {n}"


def test_a_store_outage_past_the_retry_but_within_the_lease_is_ridden_out_by_every_run(
    tmp_path, claude_cli, pg_server, pg_url
):
    """PostgreSQL down well past the store's retry window ([store] reconnect_s, short here so
    the test is quick) while tickets are in Claude Code turns, but within two thirds of their
    lease: the runs keep their claims (their events wait here), nothing fails, no finished turn
    runs again, and each ticket completes under its one run. (An outage past the lease ends the
    run interrupted: tests/faults/test_outage_turns.py.)"""
    tickets = {i: [] for i in range(3)}
    remote, desk = fleet(tmp_path, claude_cli, pg_url, tickets, store_extra="reconnect_s = 2\n")
    worker = start_worker(tmp_path, desk, "w0", "--once", "--parallel", "3")
    lines: list[str] = []
    assert worker.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(worker.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        wait_inside_a_turn(pg_url)
        with pg_server.down():
            time.sleep(8)  # four retry windows
            # ...and on until a run met it: on a loaded machine a turn may write no event for
            # those 8 s (Claude Code still starting). Up at the latest after 60 s: half the lease.
            deadline = time.monotonic() + 52
            while not any("the store is out of reach" in line for line in list(lines)) \
                    and time.monotonic() < deadline:
                time.sleep(0.2)
        worker.wait(timeout=600)
        reader.join(timeout=30)
        output = "".join(lines)
    finally:
        kill_group(worker)
    print(output)
    assert worker.returncode == 0 and "Traceback" not in output, output
    assert "the store is out of reach" in output, output  # the outage was met, and said
    with TicketStore(pg_url) as store:
        ends = [e["data"] for e in store.list_events() if e["kind"] == "run_end"]
        assert not [d for d in ends if d["status"] in ("failed", "lost")], ends
        for i in tickets:  # each complete under its one run
            runs = store.list_runs(f"t{i:02d}")
            assert [r["status"] for r in runs] == ["complete"], runs
