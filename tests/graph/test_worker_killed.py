"""kill -9 of a worker right after it took a due retry (orchestrator.killpoints: retry.taken),
before its resume claimed the run: the retry is due again once the worker's lease has passed, and
another worker takes it (before, the retry was taken out of the queue at once and lost). On
SQLite and on PostgreSQL (a team's workers; the database's clock decides when it is due)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from graph_helpers import add_ticket
from test_worker_queue import _worker

from orchestrator.killpoints import VARIABLE
from orchestrator.testing.fakes import PerTicketAgentLLM, RecordingCodingAgent

LEASE_S = 1.0

WORKER = r"""
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_worker_queue import Said, _worker
from orchestrator.running.fleet import work
from orchestrator.testing.fakes import PerTicketAgentLLM, RecordingCodingAgent
with _worker(Path({tmp!r}), Path({project!r}), PerTicketAgentLLM({{}}), RecordingCodingAgent(), {store!r},
             retries=2, retry_wait_s=0, lease_s={lease!r}) as orch:
    work(orch, parallel=1, once=True, view=Said(), idle_wait_s=0.05)
"""


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_worker_killed_after_taking_a_retry_leaves_it_due_again_after_its_lease(tmp_path, project, engine,
                                                                                  request):
    store = {"url": request.getfixturevalue("pg_url")} if engine == "postgres" else None
    with _worker(tmp_path, project, PerTicketAgentLLM({}), RecordingCodingAgent(), store, retries=2,
                 retry_wait_s=0, lease_s=LEASE_S) as orch:
        add_ticket(orch, project, "a", title="Alpha")
        token = orch.store.claim_for_resume("a", orch.store.create_run("a"))
        orch.lifecycle.fail("a", str(orch.store.latest_run("a")["id"]), "Claude Code crashed", resumable=True,
                            transient=True, token=token)
        assert orch.store.retry_of("a")[1] is not None  # due now (no wait)
    script = WORKER.format(tests=str(Path(__file__).parent), tmp=str(tmp_path), project=str(project),
                           lease=LEASE_S, store=store)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, VARIABLE: "retry.taken:1"})
    assert proc.returncode == -9, proc.stderr[-2000:]
    with _worker(tmp_path, project, PerTicketAgentLLM({}), RecordingCodingAgent(), store, retries=2,
                 retry_wait_s=0, lease_s=LEASE_S) as orch:
        assert orch.store.retry_of("a")[1] is not None  # still queued, not lost
        assert orch.store.take_retry(LEASE_S) is None  # the killed worker's, until its lease ends
        time.sleep(LEASE_S + 0.2)
        taken = orch.store.take_retry(LEASE_S)
        assert taken is not None and taken.ticket_id == "a"


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_retry_whose_resume_cannot_start_is_dropped_not_taken_every_lease(tmp_path, project, engine, request):
    """A retry held for a lease (so a kill loses none) whose resume fails before its claim (the
    ticket's file broken since): the worker says why and drops it, as a spent retry, for a person
    to resume; held, it would fail again every lease, and keep `--once` waiting forever."""
    from test_worker_queue import Said

    from orchestrator.running.fleet import work

    view = Said()
    store = {"url": request.getfixturevalue("pg_url")} if engine == "postgres" else None
    with _worker(tmp_path, project, PerTicketAgentLLM({}), RecordingCodingAgent(), store, retries=2,
                 retry_wait_s=0, lease_s=LEASE_S) as orch:
        ticket = add_ticket(orch, project, "a", title="Alpha")
        broken = tmp_path / "a.md"
        broken.write_text("---\nid: a\ntitle: [unclosed\n---\nbody\n")
        orch.store.upsert_ticket(ticket.replace(source=str(broken)))
        token = orch.store.claim_for_resume("a", orch.store.create_run("a"))
        orch.lifecycle.fail("a", str(orch.store.latest_run("a")["id"]), "Claude Code crashed", resumable=True,
                            transient=True, token=token)
        assert orch.store.retry_of("a")[1] is not None  # due now (no wait)
        done = threading.Event()
        worker = threading.Thread(target=lambda: (work(orch, parallel=1, once=True, view=view,
                                                       idle_wait_s=0.05), done.set()), daemon=True)
        worker.start()
        finished = done.wait(LEASE_S * 10)
        orch.stop.set()  # (a worker still waiting for the retry: stopped, so the test ends)
        worker.join(30)
        assert finished, "the --once worker kept waiting for a retry that cannot start"
        assert orch.store.retry_of("a") == (1, None)  # out of the queue; its count kept
        assert orch.store.get_ticket("a").status.value == "failed"
    said = [msg for tid, msg in view.lines if tid == "a"]
    assert sum("retry 1 of 2" in m for m in said) == 1, said  # taken once, not every lease
