"""kill -9 of the LangGraph Server entry (orchestrator.running.langgraph_entry, the graph
`langgraph.json` names) just after a failing run's end was stored (orchestrator.killpoints:
run.ended), its work kept on its branch: a real process running the entry's graph on the offline
fake model and the real Claude Code CLI, a real SQLite store and git.

What differs from LangGraph Server itself: the server's own checkpoints are not used; the graph
the entry returns is invoked in that process (as `langgraph dev` would call its nodes), and the
server's restart is played by a new BoundServices running the node LangGraph Server would run
again (its last checkpoint stood before `fail`). tests/e2e/test_langgraph_dev.py kills a real
`langgraph dev` mid-run (slow); this case runs in seconds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from server_helpers import make_project

from orchestrator.graph import build_graph
from orchestrator.killpoints import VARIABLE
from orchestrator.workspace.git import out
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

SERVER = r"""
import sys
sys.path.insert(0, {tests!r})
from test_langgraph_entry import load_factory
load_factory()({{"configurable": {{"fake": True}}}}).invoke({{"ticket_id": "001-greeting"}})
"""


def test_a_failed_run_with_kept_work_killed_after_its_end_loses_nothing_and_runs_no_turn_twice(
        tmp_path, claude_cli, monkeypatch):
    project = make_project(tmp_path, backend=None)
    toml = tmp_path / "middle.toml"
    # Its check fails once the turn wrote greeting.py, and the turn limit leaves no correction: the
    # run fails, its work kept on its branch (the `fail` node).
    toml.write_text(toml.read_text().replace("max_turns = 4", "max_turns = 1")
                    + '\n[check]\ncommands = ["test ! -e calc/greeting.py"]\n')
    proc = subprocess.run([sys.executable, "-c", SERVER.format(tests=str(Path(__file__).parent))], cwd=tmp_path,
                          capture_output=True, text=True, timeout=180,
                          env={**os.environ, "MIDDLE_CONFIG": str(toml), VARIABLE: "run.ended:1"})
    assert proc.returncode == -9, proc.stderr[-3000:]
    db = project.state_path / "middle.sqlite3"
    with TicketStore(db) as store:
        run = store.latest_run("001-greeting")
        assert run is not None and run["status"] == "failed", run
        assert (store.run_end_data(run["id"]) or {}).get("kept_work")
        kept = run["head_commit"]
        assert kept and "greeting.py" in out(Path(run["repo"]), "show", "--stat", "--format=", kept)
    monkeypatch.setenv("MIDDLE_CONFIG", str(toml))
    monkeypatch.chdir(tmp_path)
    # The server restarts and runs the thread again from its own last checkpoint: `fail` again.
    from orchestrator.running.langgraph_entry import BoundServices, bind_services

    restarted = BoundServices(fake=True)
    try:
        nodes = bind_services(build_graph(), restarted).nodes
        state = {"ticket_id": "001-greeting", "run_id": run["id"]}
        assert nodes["fail"].runnable.func(state)["status"] == "failed"  # type: ignore[attr-defined]
    finally:
        restarted.close()
    with TicketStore(db) as store:
        kinds = [e["kind"] for e in store.list_events(run_id=run["id"], limit=100_000)]
        assert kinds.count("run_end") == 1 and store.get_claim("001-greeting") is None, kinds
    # `middle resume`, the limit raised: the middle agent is asked again from the kept work (the
    # entry's steps are in the project's checkpoints), no turn runs twice.
    toml.write_text(toml.read_text().replace("max_turns = 1", "max_turns = 4").replace(
        "test ! -e calc/greeting.py", "true"))
    resumed = subprocess.run([sys.executable, "-m", "orchestrator.cli", "resume", "001-greeting", "--fake"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=180,
                             env={**os.environ, "MIDDLE_CONFIG": str(toml)})
    assert "Traceback" not in resumed.stderr, resumed.stderr[-3000:]
    assert "assesses the work again" in resumed.stdout, resumed.stdout[-3000:]
    with TicketStore(db) as store:
        ended = store.get_run(run["id"])
        turns = store.list_turns(run_id=run["id"])
        kinds = [e["kind"] for e in store.list_events(run_id=run["id"], limit=100_000)]
    assert [t["turn_no"] for t in turns] == sorted({t["turn_no"] for t in turns})  # each turn stored once
    assert turns[0]["status"] == "done" and kinds.count("run_end") == 2, (turns, kinds)
    assert ended["head_commit"] and out(Path(ended["repo"]), "merge-base", "--is-ancestor", kept,
                                        ended["head_commit"]) == ""  # the kept work is in what it ended with
