"""`middle worker`: one machine of a fleet working a shared backlog until stopped.

Each machine runs `middle worker` against the same store (`[store] url`, PostgreSQL). A worker
keeps its own clone of `[project] repo_url` under its state directory, fetches it before each
ticket, runs the ticket in a worktree of that clone, and pushes the ticket's branch back, so
`middle diff` and `middle merge` work from any machine. It claims the next runnable ticket
(pending, dependencies done) in one transaction of the store (`claim_next`, tickets/queue.py),
resumes a run a passing failure stopped once its retry is due, and takes over the run of a worker
that died once that worker's claim lease has run out (its heartbeat stopped). Idle, it sleeps
until a ticket becomes runnable (PostgreSQL pushes that news alone; SQLite is polled), looking
for takeovers and due retries every `idle_wait_s`.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.config.settings import Config
from orchestrator.errors import ConfigError, GitError, StoreUnavailable
from orchestrator.killpoints import point
from orchestrator.lifecycle.run_lifecycle import ClaimedRun
from orchestrator.running.batch import BatchView, Start, run_batch
from orchestrator.running.driver import TicketDriver
from orchestrator.running.outcome import RunOutcome
from orchestrator.workspace import git as g
from orchestrator.workspace.worktrees import Worktrees
from tickets.claims import Claim, owner_died

log = logging.getLogger("middle.worker")

REMOTE = "origin"
IDLE_WAIT_S = 2.0  # idle: look for takeovers and due retries this often (and, on SQLite, new tickets)


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
    wakeups: int = 0  # times an idle wait was ended by a ticket that became runnable

    @property
    def started(self) -> list[RunOutcome]:
        """The latest outcome of each ticket run here (a run interrupted, then resumed, once)."""
        return list({o.ticket_id: o for o in self.outcomes if o.status != "skipped"}.values())


class WorkerBacklog:
    """A worker's queue (a batch's `Backlog`): hands out runs to drive while slots are free.

    Each ticket costs one claim transaction (`claim_next`). Once the store had nothing, it asks
    again only when there is news: a ticket became runnable (pushed), a run here ended, or
    `idle_wait_s` passed, when it also looks for runs to take over and retries that are due.
    """

    def __init__(self, orch: TicketDriver, view: BatchView, idle_wait_s: float):
        self.orch, self.view, self.idle_wait_s = orch, view, idle_wait_s
        self.store = orch.store
        self.wakeups = 0
        self._due = 0.0  # when to look for takeovers and retries next (monotonic)
        self._starts: list[Start] = []
        self._retries_open = False
        self._dry = False
        self._seen = self.store.runnable_seen()  # (starts the listener: news while busy counts)
        self._tried: dict[str, float] = {}  # takeovers tried here, so one that is refused waits a round

    def next(self) -> Start | None:
        now = time.monotonic()
        if now >= self._due:
            self._due, self._dry, self._retries_open = now + self.idle_wait_s, False, True
            self._starts = self._takeovers(now)
        if self._starts:
            return self._starts.pop(0)
        if self._retries_open:
            retry = self.store.take_retry(self.orch.lease_s)
            if retry is not None:
                point("retry.taken")
                return self._retry(retry.ticket_id, retry.attempt)
            self._retries_open = False
        if self._dry and self.store.runnable_seen() == self._seen:
            return None
        self._seen = self.store.runnable_seen()
        new = self.store.claim_next(dependencies=self.orch.config.run.dependencies, lease_s=self.orch.lease_s)
        if new is None:
            self._dry = True
            return None
        claimed = ClaimedRun(new.ticket_id, new.run_id)
        return Start(new.ticket_id, lambda driver: driver.run_claimed(claimed, new.token))

    def finished(self, outcome: RunOutcome) -> None:
        """A run here ended: what it freed may start (SQLite has no push); say what a passing
        failure's retry is."""
        self._dry = False
        if outcome.status not in ("failed", "interrupted") or not outcome.run_id:
            return
        end = self.store.run_end_data(outcome.run_id) or {}
        if retry := end.get("retry"):
            self.view.say(outcome.ticket_id, f"stopped by a passing failure: retry {retry['attempt']} of "
                          f"{retry['of']} in {retry['in_s']:g}s, by any worker")
        elif spent := end.get("retries_spent"):
            self.view.say(outcome.ticket_id, f"stopped by a passing failure again: its {spent} retries are "
                          f"spent, so no worker retries it; `middle resume {outcome.ticket_id}` continues it")

    def idle(self) -> None:
        """Wait for a ticket to become runnable (or `idle_wait_s`); run events do not wake it."""
        if self.store.wait_for_runnable(self.idle_wait_s):
            self.wakeups += 1
            self._dry = False

    def more_later(self) -> bool:
        """Whether something may still start (`--once` waits for it): a run live elsewhere, a
        pending ticket waiting for one pending or running, or a retry not due yet."""
        if any(not u.expired for u in self.store.running_claims()):
            return True
        return self.store.has_waiting_work(self.orch.config.run.dependencies)

    def _retry(self, ticket_id: str, attempt: int) -> Start:
        self.view.say(ticket_id, f"retry {attempt} of {self.orch.config.run.retries}: resuming its run "
                      "after a passing failure")
        store = self.store

        def drive(driver: TicketDriver) -> RunOutcome:
            try:
                return driver.resume(ticket_id)
            except Exception:  # could not start (a ticket file broken since, an unknown agent): said, and dropped
                store.drop_retry(ticket_id, attempt)
                raise

        return Start(ticket_id, drive)

    def _takeovers(self, now: float) -> list[Start]:
        """Runs left `running` by a runner that is gone (its claim lease ran out, or, on this
        machine, its process died): continued here, not started again."""
        found = []
        for u in self.store.running_claims():
            dead = u.expired or owner_died(Claim(u.ticket_id, u.run_id or "", u.host or "", u.pid or 0, "", "",
                                                 u.owner_start))
            if dead and now - self._tried.get(u.ticket_id, -1e9) >= self.idle_wait_s:
                self._tried[u.ticket_id] = now
                found.append(_resume(u.ticket_id))
        return found


def _resume(ticket_id: str) -> Start:
    """Continue the ticket's latest run (its resume claims it, refused while another holds it)."""
    return Start(ticket_id, lambda driver: driver.resume(ticket_id))


def work(orch: TicketDriver, *, parallel: int, once: bool, view: BatchView,
         idle_wait_s: float = IDLE_WAIT_S) -> WorkerReport:
    """Work the shared backlog until stopped (or, with `once`, until nothing is left to start)."""
    report = WorkerReport()
    backlog = WorkerBacklog(orch, view, idle_wait_s)
    while not orch.stop.is_set():
        try:
            result = run_batch(orch, [], parallel=parallel, view=view, backlog=backlog)
            if result.fatal is not None:
                raise result.fatal
            report.outcomes += [o for o in result.outcomes if o.status != "skipped"]
            if result.stopped:  # the store went out of reach while claiming
                raise StoreUnavailable(result.stopped)
            if once and not backlog.more_later():
                break
            backlog.idle()
            report.wakeups = backlog.wakeups
        except StoreUnavailable as exc:
            # The shared store is down (a restart, the network): the runs it stopped are
            # interrupted and resumed here or by any worker once it is back; wait for it.
            log.warning("the store is out of reach; the worker waits for it: %s", exc)
            orch.stop.wait(idle_wait_s)
    return report
