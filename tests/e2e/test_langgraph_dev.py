"""The LangGraph Server entry under a plain `langgraph dev` (langgraph-cli's in-memory server, its
blocking-call guard on): tickets run through the server's HTTP API on the offline fake model and
the real Claude Code CLI, claimed, heartbeaten and checkpointed in the project's own stores, so a
server killed mid-run strands nothing and `middle resume` continues the run from its last step.

One server for the module; the last test kills it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from langgraph.types import StateSnapshot
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from orchestrator.errors import TicketError
from orchestrator.testing.git import make_repo
from orchestrator.workspace.git import git
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
LEASE_S = 15  # the project's [run] lease_s: short, so the killed server's claim runs out soon
SERVER_HOST = "langgraph-server-machine"  # the server's claims name another machine (MIDDLE_HOSTNAME)

# t2's check stalls once Claude Code's turn wrote greet.py (not on the base commit, which `prepare`
# checks), so the test can kill the server between the turn and the commit; it passes once `open`
# exists.
GATE = """\
import os, sys, time
if not os.path.exists("greet.py"):
    sys.exit(0)
open({reached!r}, "w").close()
deadline = time.monotonic() + 300
while not os.path.exists({opened!r}) and time.monotonic() < deadline:
    time.sleep(0.2)
sys.exit(0 if os.path.exists({opened!r}) else 1)
"""
TASK = "Add a greeting.\n\nCreate `greet.py` with:\n\n```python\ndef greet():\n    return 'hi'\n```\n"


@dataclass
class Project:
    root: Path
    config: Path

    @property
    def db(self) -> Path:
        return self.root / "state" / "middle.sqlite3"

    @property
    def reached(self) -> Path:
        return self.root / "reached"

    @property
    def opened(self) -> Path:
        return self.root / "open"


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


def langgraph_cli() -> str:
    """The `langgraph` command (langgraph-cli[inmem], in the test extra)."""
    beside = Path(sys.executable).with_name("langgraph")
    found = str(beside) if beside.exists() else shutil.which("langgraph")
    if found:
        return found
    if os.environ.get("CI"):  # the test extra installs it: missing there is a failure
        pytest.fail("CI=true but the `langgraph` command is missing: pip install -e '.[test]'")
    pytest.skip("the `langgraph` command is missing: pip install 'langgraph-cli[inmem]' (in the test extra)")
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    root = tmp_path_factory.mktemp("lgdev")
    make_repo(root / "repo", {"README.md": "# greetings\n"})
    (root / "tickets").mkdir()
    (root / "tickets" / "t1.md").write_text(f"---\ntitle: Greeting\nproject: repo\nid: t1\n---\n{TASK}")
    gate = root / "gate.py"
    gate.write_text(GATE.format(reached=str(root / "reached"), opened=str(root / "open")))
    check = json.dumps([f"{sys.executable} {gate}"])
    (root / "tickets" / "t2.md").write_text(
        f"---\ntitle: Greeting, checked\nproject: repo\nid: t2\ncheck: {check}\n---\n{TASK}")
    config = root / "middle.toml"
    config.write_text(f'state_dir = "state"\n[project]\npath = "repo"\n[run]\nlease_s = {LEASE_S}\n')
    yield Project(root, config)
    (root / "open").touch()  # a gate a failed test left waiting exits


@pytest.fixture(scope="module")
def server(project: Project, claude_cli: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`langgraph dev` (plain: its reload and blocking-call guard on) serving the repository's
    langgraph.json, its paths made absolute so the server's files stay out of the repository."""
    command = langgraph_cli()
    spec = json.loads((ROOT / "langgraph.json").read_text())
    assert spec["dependencies"] == ["."]
    spec["dependencies"] = [str(ROOT)]
    for name, entry in spec["graphs"].items():  # ./file.py:attr, relative to langgraph.json
        path, attr = entry.split(":")
        spec["graphs"][name] = f"{ROOT / path}:{attr}"
    home = tmp_path_factory.mktemp("lgserver")
    (home / "langgraph.json").write_text(json.dumps(spec))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "MIDDLE_CONFIG": str(project.config), "MIDDLE_HOSTNAME": SERVER_HOST,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true",  # offline
           "LANGSMITH_TRACING": "false"}
    log = home / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([command, "dev", "--no-browser", "--port", str(port)], cwd=home, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    served = Server(f"http://127.0.0.1:{port}", proc, log)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"langgraph dev exited:\n{served.output()[-4000:]}"
            assert time.monotonic() < deadline, f"langgraph dev did not start:\n{served.output()[-4000:]}"
            try:
                if httpx.get(served.url + "/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        yield served
    finally:
        served.kill()


def start(server: Server, ticket_id: str) -> tuple[SyncLangGraphClient, str, str]:
    """A thread and a run of the `ticket` graph for `ticket_id` on the fake model, over HTTP."""
    client = get_sync_client(url=server.url)
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "ticket", input={"ticket_id": ticket_id},
                             config={"configurable": {"fake": True}})
    return client, thread["thread_id"], run["run_id"]


def checkpoint(project: Project, run_id: str) -> StateSnapshot:
    """The run's last step in the project's checkpointer, as `middle resume` reads it."""
    from orchestrator.config.settings import load_config
    from orchestrator.graph import build_graph
    from orchestrator.running.checkpoints import open_checkpointer

    checkpoints = open_checkpointer(load_config(project.config).checkpoint_target)
    try:
        return build_graph().compile(checkpointer=checkpoints.saver).get_state({"configurable": {"thread_id": run_id}})
    finally:
        checkpoints.close()


def middle(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MIDDLE_CONFIG": str(project.config)}
    return subprocess.run([str(Path(sys.executable).with_name("middle")), *args], cwd=project.root, env=env,
                          capture_output=True, text=True, timeout=280)


def test_a_ticket_runs_through_the_servers_http_api(server: Server, project: Project) -> None:
    client, thread, run = start(server, "t1")
    state = client.runs.join(thread, run)
    assert client.runs.get(thread, run)["status"] == "success", server.output()[-4000:]
    assert state["status"] == "complete" and state["commit"], state
    with TicketStore(project.db) as store:
        assert store.get_ticket("t1").status.value == "complete"
        assert store.get_claim("t1") is None
        kinds = [e["kind"] for e in store.list_events(run_id=state["run_id"])]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert git(project.root / "repo", "rev-parse", "middle/t1").stdout.strip() == state["commit"]
    # The run's steps are in the project's checkpointer too, up to its end.
    last = checkpoint(project, state["run_id"])
    assert last.values["status"] == "complete" and last.values["commit"] == state["commit"] and not last.next
    assert "BlockingError" not in server.output()


@pytest.mark.timeout(900)
def test_a_killed_server_strands_nothing_and_middle_resume_continues_its_run(server: Server,
                                                                            project: Project) -> None:
    start(server, "t2")
    deadline = time.monotonic() + 240
    while not project.reached.exists():  # the turn is done; the check waits
        assert time.monotonic() < deadline and server.proc.poll() is None, server.output()[-4000:]
        time.sleep(0.2)
    with TicketStore(project.db) as store:
        started = store.latest_run("t2")
        assert started is not None
        run_id = started["id"]
        [turn] = store.list_turns(run_id=run_id)
        claim = store.get_claim("t2")
        assert claim is not None and claim.run_id == run_id and claim.host == SERVER_HOST
        # The server's heartbeat renews the claim's lease while the run works.
        deadline = time.monotonic() + LEASE_S * 3
        while (renewed := store.get_claim("t2")) is not None and renewed.lease_until == claim.lease_until:
            assert time.monotonic() < deadline, "the claim was not renewed"
            time.sleep(0.5)
        assert renewed is not None and renewed.lease_until > claim.lease_until and renewed.token == claim.token
    assert turn["status"] == "done"
    assert checkpoint(project, run_id).next == ("check",)  # the steps up to the assessment were mirrored

    server.kill()  # as a reload or a dead machine would: no run end written

    # The claim holds until its lease runs out (another machine's: no pid to look at) ...
    with TicketStore(project.db) as store:
        with pytest.raises(TicketError, match="is being worked by"):
            store.claim_for_resume("t2", run_id, lease_s=LEASE_S)  # what `middle resume` would be told
        deadline = time.monotonic() + LEASE_S * 3
        while not (held := store.get_claim("t2")) or not held.expired:
            assert held is not None and time.monotonic() < deadline, "the claim never ran out"
            time.sleep(0.5)
        assert store.get_ticket("t2").status.value == "running"
    # ... then `middle resume` continues the run from its last step: the check, not the turn again.
    project.opened.touch()
    resumed = middle(project, "resume", "t2", "--fake")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    with TicketStore(project.db) as store:
        assert store.get_ticket("t2").status.value == "complete"
        latest = store.latest_run("t2")
        assert latest is not None and latest["id"] == run_id
        assert [t["session_id"] for t in store.list_turns(run_id=run_id)] == [turn["session_id"]]
        assert store.get_claim("t2") is None
    commit = git(project.root / "repo", "rev-parse", "middle/t2").stdout.strip()
    assert git(project.root / "repo", "show", f"{commit}:greet.py").stdout.startswith("def greet")
    assert checkpoint(project, run_id).values["commit"] == commit
