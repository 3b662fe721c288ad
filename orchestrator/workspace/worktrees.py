"""A ticket's own git worktree and branch: made at run start, committed at completion, removed after.

`.middle/worktrees/<ticket-id>` on branch `middle/<ticket-id>`, from the base branch's current
commit (or, with `[run] dependencies = "complete"`, from that commit with the dependencies'
branches merged in). Claude Code works there; the user's own working tree is never written.
Git operations that change refs or worktrees hold one file lock per state directory, so parallel
tickets and two `middle` processes never race inside git.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from filelock import FileLock

from orchestrator.errors import GitError, TicketError
from orchestrator.workspace import git as g

log = logging.getLogger("middle.workspace")

BRANCH_PREFIX = "middle/"
LOCK_TIMEOUT_S = 120.0
FETCH_ATTEMPTS = 3


def wip_ref(ticket_id: str) -> str:
    """The ref a ticket's work in progress is saved to after each turn (orchestrator.workspace.wip)."""
    return "refs/middle/wip/" + ticket_id


class PushRefused(GitError):
    """A push's compare-and-swap failed: the shared repository's ref is not what this process
    last pushed or read there (another runner wrote it since)."""

    def __init__(self, message: str, *, ref: str):
        super().__init__(message)
        self.ref = ref


def branch_name(ticket_id: str) -> str:
    return BRANCH_PREFIX + ticket_id


@dataclass(frozen=True)
class Workspace:
    """Where a run works: JSON-able, so it lives in graph state and the run record."""

    repo: str  # the repository's main working tree (toplevel)
    path: str  # the worktree
    cwd: str  # where Claude Code runs: the worktree, or the project's subfolder inside it
    branch: str
    base_branch: str
    base_commit: str  # the commit the branch started from
    # The dependencies' branches merged into base_commit ([run] dependencies = "complete"): empty
    # when it is the base branch's own commit. Known where the worktree was made (not recorded).
    merged_dependencies: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Workspace":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def origin(self) -> str:
        """What the branch started from, in words: the base branch, with what was merged into it."""
        if not self.merged_dependencies:
            return f"{self.base_branch} at {self.base_commit[:10]}"
        return (f"{self.base_branch} with its dependencies' branches {', '.join(self.merged_dependencies)} "
                f"merged in, at {self.base_commit[:10]}")


class Worktrees:
    """Creates, inspects, commits and removes ticket worktrees under one state directory."""

    def __init__(self, root: Path, base_branch: str | None = None, remote: str | None = None,
                 push_url: str | None = None):
        """`remote`: a git remote of the project's clone (a `middle worker`'s "origin"): each
        ticket then starts from the remote's base branch, fetched first, and its finished branch
        is pushed there. `push_url` ([project] repo_url): where a ticket run from a developer's
        checkout pushes its branch, so other machines can review it and take its run over."""
        self.root = Path(root)
        self.base_branch = base_branch
        self.remote = remote
        self.push_url = push_url
        self._lock = FileLock(str(self.root.parent / "worktrees.lock"), timeout=LOCK_TIMEOUT_S)
        # Each shared ref's commit as this process last pushed or read it ("" = absent): the
        # expected value of its next push's --force-with-lease, so a runner that lost its run
        # (a stalled push landing after the takeover's) cannot overwrite what another one pushed.
        self._leases: dict[str, str] = {}

    def locked(self) -> FileLock:
        """The lock held around ref and worktree changes (merge and revert take it too)."""
        self.root.parent.mkdir(parents=True, exist_ok=True)
        return self._lock

    def path_for(self, ticket_id: str) -> Path:
        return self.root / ticket_id

    def has(self, path: str | Path | None) -> bool:
        """Whether `path` is one of this runner's worktrees, present (not another clone's or
        machine's, not removed)."""
        if not path:
            return False
        return Path(path).is_dir() and Path(path).parent == self.root

    def has_at(self, path: str | Path | None, commit: str | None) -> bool:
        """`has(path)`, with `commit` (when given) in its checked-out history: not a stale copy
        of a branch that another machine (with the same paths) has moved on since."""
        if not self.has(path):
            return False
        assert path is not None
        return commit is None or _holds(Path(path), "HEAD", commit)

    # -- run start ---------------------------------------------------------------------------
    def prepare(self, ticket_id: str, project_path: str | Path, *, start_from: Sequence[str] = ()) -> Workspace:
        """A fresh worktree for a new run of the ticket (an old one of an earlier run is replaced).

        `start_from`: dependency branches merged into the start point (dependencies = complete).
        """
        project = Path(project_path).resolve()
        repo = g.toplevel(project)
        with self.locked():
            if self.remote:
                self._fetch(repo, self.remote)
            base = self.base_branch or (self._remote_default(repo) if self.remote else g.current_branch(repo))
            if not base:
                raise GitError(f"the repository at {repo} has no branch checked out (detached HEAD), so "
                               "there is no base branch to start tickets from: check out a branch, or "
                               "set [project] base_branch in middle.toml")
            start = self._start_commit(repo, ticket_id, base)
            if start is None:
                known = ", ".join(g.branches(repo)[:10]) or "none"
                raise GitError(f"the base branch {base!r} does not exist in {repo} (branches: {known}): "
                               "set [project] base_branch in middle.toml to the branch tickets "
                               "start from and merge into")
            start, merged = self._merge_dependencies(repo, ticket_id, start, list(start_from))
            path, branch = self.path_for(ticket_id), branch_name(ticket_id)
            self._remove(repo, path, branch)
            self.root.mkdir(parents=True, exist_ok=True)
            g.git(repo, "worktree", "add", "--quiet", "-b", branch, str(path), start)
        rel = project.relative_to(repo) if project != repo else Path()
        return Workspace(repo=str(repo), path=str(path), cwd=str(path / rel), branch=branch,
                         base_branch=base, base_commit=start, merged_dependencies=merged)

    def _fetch(self, repo: Path, remote: str) -> None:
        """Fetch the shared remote (under the lock: two fetches into one clone at once, as two
        parallel tickets of a worker would do, fight over its refs and packs). Tried three times:
        a remote that another machine is pushing to can answer one fetch with an incomplete pack."""
        for attempt in range(FETCH_ATTEMPTS):
            try:
                g.git(repo, "fetch", "--quiet", "--prune", remote)
                return
            except GitError:
                if attempt == FETCH_ATTEMPTS - 1:
                    raise
                time.sleep(0.5 * (attempt + 1))

    def _start_commit(self, repo: Path, ticket_id: str, base: str) -> str | None:
        """The base branch's commit a ticket starts from. In a team ([project] repo_url) run from a
        developer's checkout, the shared repository's base branch as it is now (fetched), so a
        ticket has what was merged on other machines; this repository's own base branch when it
        holds all that already (it may have commits not yet pushed)."""
        here = self._commit_of(repo, base)
        if self.remote or not self.push_url:
            return here  # (a worker's clone: the remote's copy, fetched just before)
        shared = self._pushed_tip(repo, base, strict=True)
        if shared is None or (here is not None and g.is_ancestor(repo, shared, here)):
            return here
        if here is None or g.is_ancestor(repo, here, shared):
            return shared
        raise GitError(f"cannot start ticket {ticket_id}: {base} in {repo} and {base} on the shared repository "
                       f"([project] repo_url) have both moved on: fetch it (`git pull` on {base}), then run "
                       "the ticket again")

    def _ref(self, branch: str) -> str:
        """Where a branch is read from: the local branch, or the remote's copy of it."""
        return f"refs/remotes/{self.remote}/{branch}" if self.remote else f"refs/heads/{branch}"

    def _commit_of(self, repo: Path, branch: str) -> str | None:
        return g.ref_commit(repo, self._ref(branch))

    def _remote_default(self, repo: Path) -> str | None:
        proc = g.git(repo, "symbolic-ref", "--quiet", "--short", f"refs/remotes/{self.remote}/HEAD", check=False)
        name = proc.stdout.strip()
        return name.split("/", 1)[1] if proc.returncode == 0 and "/" in name else None

    def _merge_dependencies(self, repo: Path, ticket_id: str, start: str,
                            branches: list[str]) -> tuple[str, list[str]]:
        """The start commit with the dependencies' branches merged in, and those of them that
        brought something (a branch already in the start adds nothing and is not named)."""
        merged: list[str] = []
        for branch in branches:
            dep = self._ref(branch)
            proc = g.git(repo, "rev-parse", "--verify", "--quiet", f"{dep}^{{commit}}", check=False)
            tip = proc.stdout.strip() if proc.returncode == 0 else None
            if tip is None:
                raise TicketError(f"ticket {ticket_id!r} starts from its dependency's branch {dep!r}, "
                                  "which no longer exists: run that ticket again, or merge it first")
            if g.is_ancestor(repo, tip, start):
                continue
            merged.append(branch)
            if g.is_ancestor(repo, start, tip):
                start = tip
                continue
            result = g.merge_trees(repo, start, tip)
            if result.tree is None:
                raise TicketError(
                    f"ticket {ticket_id!r} cannot start: its dependencies' branches conflict in "
                    f"{', '.join(result.conflicts)}; merge them one at a time (`middle merge`), then "
                    f"run it again")
            start = g.commit_tree(repo, result.tree, [start, tip],
                                  f"Start {branch_name(ticket_id)} from its dependencies\n\nMerges {dep}.")
        return start, merged

    # -- during and at the end of a run ------------------------------------------------------
    def changes(self, ws: Workspace) -> list[dict[str, Any]]:
        """What the ticket changed so far (committed or not), against its start."""
        _stage(ws.path)
        return g.numstat(ws.path, ws.base_commit, cached=True)

    def commit(self, ws: Workspace, message: str) -> tuple[str | None, list[dict[str, Any]]]:
        """Commit everything Claude Code changed on the ticket's branch.

        Returns (commit sha, changed paths); (None, []) when the ticket changed nothing. Safe to
        call again after a crash: an existing commit with a clean worktree is returned as is.
        """
        if not Path(ws.path).is_dir():
            raise GitError(f"the ticket's worktree {ws.path} is gone (removed by hand or by "
                           "`middle gc`?): start the ticket again with `middle run --rerun`")
        _stage(ws.path)
        staged = g.git(ws.path, "diff", "--cached", "--quiet", "HEAD", check=False).returncode != 0
        if staged:
            # No hooks (the user's pre-commit would judge half-reviewed work; the user reviews
            # before merging) and no signing prompt in a headless run.
            g.git(ws.path, *g.author_args(Path(ws.repo)), "-c", "commit.gpgsign=false", "commit",
                  "--quiet", "--no-verify", "-F", "-", input=message)
        head = g.out(ws.path, "rev-parse", "HEAD")
        if head == ws.base_commit:
            return None, []
        return head, g.numstat(ws.path, ws.base_commit, head)

    @property
    def shared(self) -> str | None:
        """Where ticket branches are published: the worker's remote, else [project] repo_url."""
        return self.remote or self.push_url

    def push(self, ws: Workspace) -> None:
        """Publish the ticket's branch on the shared repository, so any machine can review and
        merge it; a rerun's branch replaces the earlier one there (PushRefused: another runner
        pushed it since this one last did)."""
        if self.shared:
            with self.locked():  # it updates the clone's remote-tracking refs, as a fetch does
                self.push_ref(Path(ws.path), g.out(ws.path, "rev-parse", "HEAD"), f"refs/heads/{ws.branch}")

    def push_ref(self, cwd: Path, commit: str, ref: str) -> None:
        """Set `ref` on the shared repository to `commit` ("" deletes it), as a compare-and-swap:
        `--force-with-lease=<ref>:<the commit this process last pushed or read there>`. Before
        this process's first push of the ref, the expected value is read now (its caller has
        just checked the run's fencing token). Call under `locked()`."""
        assert self.shared
        expected = self._leases.get(ref)
        if expected is None:
            expected = self.remote_commit(cwd, ref)
        proc = g.git(cwd, "push", "--quiet", "--porcelain", f"--force-with-lease={ref}:{expected}", self.shared,
                     f"{commit}:{ref}", check=False)
        if proc.returncode != 0:
            said = (proc.stdout + proc.stderr).strip()
            if "stale info" in said or "fetch first" in said or "rejected" in said:
                # Every later push of this ref is refused as well, until its owner (having checked
                # that it still holds the run) calls `forget`.
                raise PushRefused(f"the shared repository's {ref} is not at {expected[:10] or '(absent)'} any "
                                  "more: another runner pushed it since this one last did", ref=ref)
            if commit == "" and "remote ref does not exist" in said:
                self._leases[ref] = ""
                return
            raise GitError(f"git push of {ref} to the shared repository failed in {cwd}: {said.splitlines()[-1:]}")
        self._leases[ref] = commit

    def remote_commit(self, cwd: Path, ref: str) -> str:
        """`ref`'s commit on the shared repository now ("" when it has none)."""
        assert self.shared
        line = g.out(cwd, "ls-remote", self.shared, ref).split("\n")[0]
        return line.split()[0] if line.strip() else ""

    def forget(self, ref: str) -> None:
        """The next push of `ref` expects what is there then (its caller holds the run: what was
        pushed there since came from a stale owner)."""
        self._leases.pop(ref, None)

    def saw(self, ref: str, commit: str | None) -> None:
        """This process read `ref` on the shared repository at `commit` (a takeover's fetch)."""
        self._leases[ref] = commit or ""

    # -- takeover ----------------------------------------------------------------------------
    def adopt(self, ticket_id: str, project_path: str | Path, begun: Workspace, *,
              holding: str | None = None) -> tuple[Workspace, str] | None:
        """This runner's worktree for a run begun in another clone (a dead worker's machine):
        the ticket's branch as pushed to the shared repository, else the commit the run started
        from; with which of the two it is. None when neither is known here (the caller then
        starts a fresh worktree).

        `holding` (a review round continuing the commit its last round left): only the pushed
        branch that holds that commit is taken, never the start commit; else None."""
        project = Path(project_path).resolve()
        repo = g.toplevel(project)
        path, branch = self.path_for(ticket_id), begun.branch
        with self.locked():
            if self.remote:
                self._fetch(repo, self.remote)
            here = self._local_holding(repo, branch, holding) if holding is not None else None
            # (fetched first: it may bring the start commit)
            tip = None if here else self._pushed_tip(repo, branch, strict=holding is not None)
            base = begun.base_commit if g.has_object(repo, begun.base_commit) else None
            if tip is not None and holding is not None and not _holds(repo, tip, holding):
                tip = None  # rewritten on the shared repository without the commit
            if self.shared and here is None:
                self.saw(f"refs/heads/{branch}", tip)  # this runner's push of the branch expects it there
            if here is not None:  # a review round whose worktree was removed: its branch is here
                start, source = here, f"its branch here ({here[:10]}; its worktree was removed)"
            elif tip is not None and base is not None and g.is_ancestor(repo, base, tip):
                start, source = tip, f"its branch as pushed ({tip[:10]})"
            elif base is not None and holding is None:
                start, source = base, f"the commit it started from ({base[:10]}; its branch was never pushed)"
            else:
                return None
            self._remove(repo, path, branch)
            self.root.mkdir(parents=True, exist_ok=True)
            g.git(repo, "worktree", "add", "--quiet", "-b", branch, str(path), start)
        try:
            rel = Path(begun.cwd).relative_to(begun.path)
        except ValueError:
            rel = Path()
        return Workspace(repo=str(repo), path=str(path), cwd=str(path / rel), branch=branch,
                         base_branch=begun.base_branch, base_commit=begun.base_commit), source

    def local_holding(self, project_path: str | Path, branch: str, commit: str) -> str | None:
        """The branch's commit in the project's own repository when it holds `commit` (a round
        whose worktree was removed continues it there); None otherwise."""
        return self._local_holding(g.toplevel(Path(project_path).resolve()), branch, commit)

    @staticmethod
    def _local_holding(repo: Path, branch: str, commit: str) -> str | None:
        tip = g.ref_commit(repo, f"refs/heads/{branch}")
        return tip if tip is not None and _holds(repo, tip, commit) else None

    def pushed_holding(self, project_path: str | Path, branch: str, commit: str) -> str | None:
        """The branch's commit on the shared repository when it holds `commit`; None when there
        is no shared repository, the branch was never pushed, or it was rewritten without it."""
        repo = g.toplevel(Path(project_path).resolve())
        with self.locked():
            if self.remote:
                self._fetch(repo, self.remote)
            tip = self._pushed_tip(repo, branch, strict=True)
        return tip if tip is not None and _holds(repo, tip, commit) else None

    def _pushed_tip(self, repo: Path, branch: str, *, strict: bool = False) -> str | None:
        """The branch's commit on the shared repository (None: never pushed, or no shared one).
        `strict`: a shared repository that cannot be read is a GitError, not "never pushed"."""
        if self.remote:
            return self._commit_of(repo, branch)
        if not self.push_url:
            return None
        proc = g.git(repo, "fetch", "--quiet", self.push_url, f"refs/heads/{branch}", check=False)
        if proc.returncode == 0:
            return g.ref_commit(repo, "FETCH_HEAD")
        if strict and "couldn't find remote ref" not in proc.stderr:
            lines = proc.stderr.strip().splitlines()
            said = [line for line in lines if line.startswith("fatal:")] or lines  # not the URL's line
            raise GitError(f"fetching {branch} from [project] repo_url failed in {repo}: "
                           f"{said[-1] if said else proc.returncode}")
        return None

    # -- removal -----------------------------------------------------------------------------
    def remove(self, repo: str | Path, ticket_id: str, *, keep_branch: bool = False) -> None:
        """Remove the ticket's worktree (and its branch unless `keep_branch`; with the branch, the
        local work-in-progress ref of its runs, orchestrator.workspace.wip)."""
        with self.locked():
            self._remove(Path(repo), self.path_for(ticket_id), None if keep_branch else branch_name(ticket_id))
            if not keep_branch:
                g.git(repo, "update-ref", "-d", wip_ref(ticket_id), check=False)

    def _remove(self, repo: Path, path: Path, branch: str | None) -> None:
        if path.exists():
            proc = g.git(repo, "worktree", "remove", "--force", "--force", str(path), check=False)
            if proc.returncode != 0 and path.exists():
                shutil.rmtree(path, ignore_errors=True)
        g.git(repo, "worktree", "prune", check=False)
        if branch and g.branch_commit(repo, branch):
            g.git(repo, "branch", "-D", branch)

    def leftovers(self) -> list[Path]:
        """Worktree folders under the state directory (gc compares them with the tickets)."""
        return sorted(p for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []


def _holds(repo: Path, tip: str, commit: str) -> bool:
    """Whether `commit` is `tip` or one of its ancestors (an unknown commit is not)."""
    return g.has_object(repo, commit) and g.is_ancestor(repo, commit, tip)


def _stage(worktree: str | Path) -> None:
    """Stage everything Claude Code changed, but not the worktree's local files (what `[worktree]
    copy` and `setup` put there: an `.env`, a virtualenv), which no commit of the branch takes."""
    from orchestrator.workspace.local_files import excluded

    g.git(worktree, "add", "-A", "--", ".", *excluded(worktree))
