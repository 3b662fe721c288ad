"""`middle worker`: one machine of a fleet working a shared backlog until stopped.

Each machine runs `middle worker` against the same store (`[store] url`, PostgreSQL). A worker
keeps its own clone of `[project] repo_url` under its state directory, fetches it before each
ticket, runs the ticket in a worktree of that clone, and pushes the ticket's branch back, so
`middle diff` and `middle merge` work from any machine. It takes the next runnable ticket
(pending, dependencies done) under the same atomic claim as `middle run`, and takes over the run
of a worker that died once that worker's claim lease has run out (its heartbeat stopped).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.config.settings import Config
from orchestrator.errors import ConfigError, GitError, StoreUnavailable
from orchestrator.running.batch import BatchView, run_batch
from orchestrator.running.driver import TicketDriver
from orchestrator.running.outcome import RunOutcome
from orchestrator.workspace import git as g
from orchestrator.workspace.worktrees import Worktrees
from tickets.claims import claim_is_live
from tickets.deps import SATISFIED

log = logging.getLogger("middle.worker")

REMOTE = "origin"
IDLE_WAIT_S = 2.0  # when nothing can start: wait this long for any run event, then look again


def ensure_clone(config: Config) -> Path:
    """The worker's own clone of [project] repo_url (cloned on first use), with the base branch
    checked out. A clone that holds no commit (the shared repository was empty, or its HEAD named
    a branch it did not have, when an earlier version cloned it) can hold no work either: it is
    made again, so the next try after a fix works without deleting it by hand."""
    url = config.project.repo_url
    if not url:
        raise ConfigError("`middle worker` needs the shared repository: set [project] repo_url in "
                          "middle.toml (a URL or path git can clone; each ticket's branch is pushed there)")
    path = config.clone_path
    with Worktrees(config.worktrees_path).locked():  # two workers sharing a state dir clone once
        if (path / ".git").exists():
            if g.ref_commit(path, "HEAD") is None:
                shutil.rmtree(path)
            else:
                have = g.git(path, "remote", "get-url", REMOTE, check=False).stdout.strip()
                if have != url:
                    raise ConfigError(f"{path} is a clone of {have or 'nothing'}, not of [project] repo_url "
                                      f"{url}: move it away (the worker clones again) or fix repo_url")
                return path
        _clone(url, path, config.project.base_branch)
    return path


def _clone(url: str, path: Path, base: str | None) -> None:
    """Clone `url` into `path` with `base` checked out (not the branch the remote's HEAD names),
    by way of a folder of its own: a clone that fails, or is stopped halfway, leaves no `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{path.name}.partial-", dir=path.parent))
    try:
        branch = ["--branch", base] if base else []
        proc = g.git(path.parent, "clone", "--quiet", "--origin", REMOTE, *branch, url, str(partial), check=False)
        if proc.returncode != 0:
            lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
            said = ([line for line in lines if line.startswith("fatal:")] or lines or [str(proc.returncode)])[-1]
            if base and "not found in upstream" in said:
                said = f"it has no branch {base} (is it empty?): push {base} there first"
            raise GitError(f"cannot clone [project] repo_url {url} into {path}: {said}. Nothing was kept: "
                           "fix it, then start the worker again")
        if g.ref_commit(partial, "HEAD") is None:  # no base_branch, and the remote's HEAD names no commit
            raise GitError(f"cannot clone [project] repo_url {url} into {path}: its HEAD names no commit "
                           "(an empty repository?): set [project] base_branch in middle.toml to the branch "
                           "tickets start from, or push one there first")
        partial.rename(path)
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)


@dataclass
class WorkerReport:
    outcomes: list[RunOutcome] = field(default_factory=list)

    @property
    def started(self) -> list[RunOutcome]:
        """The latest outcome of each ticket run here (a run interrupted, then resumed, once)."""
        return list({o.ticket_id: o for o in self.outcomes if o.status != "skipped"}.values())


def _orphans(store: Any) -> list[str]:
    """Runs to continue, not start again: those left `running` by a runner that is gone (its
    claim lease ran out, or, on this machine, its process died), and those interrupted with no
    person behind it (a stopped worker, the store out of reach for a moment)."""
    found = []
    for ticket in store.list_tickets(status="running"):
        claim = store.get_claim(ticket.id)
        if claim is None or not claim_is_live(claim):
            found.append(ticket.id)
    for ticket in store.list_tickets(status="interrupted"):
        run = store.latest_run(ticket.id)
        if run and (store.run_end_data(run["id"]) or {}).get("auto_resume") and store.get_claim(ticket.id) is None:
            found.append(ticket.id)
    return found


def _could_start_later(store: Any, mode: str) -> bool:
    """Whether a pending ticket may still become runnable: something it waits for is pending or
    running somewhere (so a worker with `--once` waits rather than leaves)."""
    statuses = {t.id: t.status.value for t in store.list_tickets()}
    for ticket in store.list_tickets(status="pending"):
        waits = [d for d in ticket.depends_on if statuses.get(d) not in SATISFIED[mode]]
        if not waits or any(statuses.get(d) in ("pending", "running") for d in waits):
            return True
    return False


def work(orch: TicketDriver, *, parallel: int, once: bool, view: BatchView,
         idle_wait_s: float = IDLE_WAIT_S) -> WorkerReport:
    """Work the shared backlog until stopped (or, with `once`, until nothing is left to start)."""
    report = WorkerReport()
    while not orch.stop.is_set():
        try:
            if not _one_pass(orch, report, parallel=parallel, once=once, view=view, idle_wait_s=idle_wait_s):
                break
        except StoreUnavailable as exc:
            # The shared store is down (a restart, the network): the runs it stopped are
            # interrupted and resumed here or by any worker once it is back; wait for it.
            log.warning("the store is out of reach; the worker waits for it: %s", exc)
            orch.stop.wait(idle_wait_s)
    return report


def _one_pass(orch: TicketDriver, report: WorkerReport, *, parallel: int, once: bool, view: BatchView,
              idle_wait_s: float) -> bool:
    """Start (or resume) what can run now, and wait for news; False when the worker is done."""
    store, mode = orch.store, orch.config.run.dependencies
    orphans = _orphans(store)
    pending = [t.id for t in store.list_tickets(status="pending")]
    started = []
    if orphans or pending:
        result = run_batch(orch, orphans + pending, parallel=parallel, view=view,
                           resume=frozenset(orphans))
        if result.fatal is not None:
            raise result.fatal
        started = [o for o in result.outcomes if o.status != "skipped"]
        report.outcomes += started
    if started:
        return True  # finished ones may have unblocked others: look again at once
    running_elsewhere = any(claim_is_live(c) for c in (store.get_claim(t.id)
                            for t in store.list_tickets(status="running")) if c is not None)
    if once and not running_elsewhere and not (pending and _could_start_later(store, mode)):
        return False
    store.wait_for_events(idle_wait_s)  # another worker's progress wakes us at once (NOTIFY)
    return True
