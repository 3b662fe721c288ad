"""Helpers for `middle serve` tests (the browser tests use them too): a sample project, a served app
with a client, an SSE reader, and scripted replies for the fake Messages API."""

from __future__ import annotations

import json
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx

from orchestrator.config.settings import Config, load_config
from orchestrator.server.live import ServerThread
from orchestrator.testing import make_repo

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def make_project(root: Path, *, backend: str | None = "bm25", parallel: int = 1) -> Config:
    """The example repo and backlog in `root`, with a middle.toml (memory off when backend is None;
    `parallel` runs at once).

    The default backend is built in (bm25 needs no model), so these tests need no plugin installed.
    """
    shutil.copytree(EXAMPLES / "sample-repo", root / "repo")
    make_repo(root / "repo")  # tickets run on their own branch of the project's repository
    shutil.copytree(EXAMPLES / "backlog", root / "tickets")
    memory = f'[memory]\nsave_dir = ".middle/memory"\nbackend = "{backend}"\n' if backend else ""
    (root / "middle.toml").write_text(
        '[agent]\nmax_turns = 4\nmax_cost_usd = 5.0\n\n'
        '[coding_agent.options]\nallowed_tools = ["Read", "Write", "Edit"]\nturn_timeout_s = 120\n\n'
        f'{memory}\n[run]\nparallel = {parallel}\n\n[project]\nid = "calc"\npath = "repo"\ntickets_dir = "tickets"\n')
    return load_config(root / "middle.toml", environ={})


class Served:
    """A running server: its URL, an HTTP client, and the app's shared state."""

    def __init__(self, thread: ServerThread, app: Any):
        self.thread, self.app, self.url = thread, app, thread.url
        self.client = httpx.Client(base_url=thread.url, timeout=60)

    @property
    def state(self) -> Any:
        return self.app.state.middle

    def close(self) -> None:
        self.state.runs.join(timeout=180)  # let background runs end before the services close
        self.client.close()
        self.thread.stop()


def read_sse(client: httpx.Client, url: str, *, until: str = "end", headers: dict[str, str] | None = None,
             limit: int = 10_000) -> list[tuple[str, dict[str, Any], str | None]]:
    """Read a Server-Sent Events stream until an event named `until`: [(event, data, id)]."""
    events: list[tuple[str, dict[str, Any], str | None]] = []
    name, data, ident = "message", [], None
    with client.stream("GET", url, headers=headers, timeout=httpx.Timeout(180, connect=10)) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif line.startswith("id:"):
                ident = line[3:].strip()
            elif line == "" and data:
                events.append((name, json.loads("\n".join(data)), ident))
                if name == until or len(events) >= limit:
                    return events
                name, data, ident = "message", [], None
    return events


def wait_for_run(served: Served | httpx.Client, run_id: str) -> dict[str, Any]:
    """Follow the run's event stream until it ends; return the run as the API shows it."""
    client = served if isinstance(served, httpx.Client) else served.client
    events = read_sse(client, f"/api/runs/{run_id}/stream")
    assert events[-1][0] == "end", events[-3:]
    return client.get(f"/api/runs/{run_id}").json()


def plan(prompt: str) -> str:
    """The middle agent's scripted plan: the first prompt for Claude Code."""
    return json.dumps({"prompt": prompt})


def decide(complete: bool, summary: str, next_prompt: str = "") -> str:
    """The middle agent's scripted assessment of a turn."""
    return json.dumps({"complete": complete, "summary": summary, "next_prompt": next_prompt})


class Stall:
    """A scripted Claude Code turn that does not answer until released, so a test can look at (or
    stop) a run while it is in progress. One Stall can hold several turns at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self._held = threading.Condition()
        self.calls = 0

    def __call__(self, body: dict[str, Any]) -> str:
        with self._held:
            self.calls += 1
            self._held.notify_all()
        self.release.wait(120)
        return "Done."

    def wait_for(self, calls: int = 1, timeout: float = 120) -> bool:
        """Until `calls` turns are being held (False if they are not within the timeout)."""
        with self._held:
            return self._held.wait_for(lambda: self.calls >= calls, timeout)


def complete_by_hand(state: Any, ticket_id: str, files: dict[str, str]) -> None:
    """A ticket whose run wrote `files` on its branch and completed (what the graph does), no model.
    `state`: the app's ServerState."""
    state.sync_folder()
    ticket = state.store.get_ticket(ticket_id)
    run_id = state.store.claim_new_run(ticket_id, ["pending"])
    assert run_id is not None
    worktrees = state.review().worktrees
    ws = worktrees.prepare(ticket_id, ticket.project_path)
    state.store.set_run_fields(run_id, isolation="worktree", repo=ws.repo, base_branch=ws.base_branch,
                               base_commit=ws.base_commit, branch=ws.branch, worktree=ws.path)
    for rel, text in files.items():
        (Path(ws.path) / rel).write_text(text)
    sha, changes = worktrees.commit(ws, f"{ticket.title}\n")
    state.store.set_run_fields(run_id, head_commit=sha, changes=changes)
    assert state.store.end_run(ticket_id, run_id, "complete", None)


@contextmanager
def serving() -> Iterator[Callable[..., Served]]:
    """start(config, fake=True, token=None, services=None) -> Served: the real app served by
    uvicorn on 127.0.0.1; every app started is stopped at the end."""
    from orchestrator.server import create_app

    started: list[Served] = []

    def start(config: Config, **kwargs: Any) -> Served:
        kwargs.setdefault("fake", True)
        app = create_app(config, **kwargs)
        served = Served(ServerThread(app).start(), app)
        started.append(served)
        return served

    try:
        yield start
    finally:
        for served in reversed(started):
            served.close()
