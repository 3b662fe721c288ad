"""A run's work in progress: the worktree as Claude Code left it after each turn, kept where a
takeover on another machine finds it.

After every turn the worktree's whole state (committed or not, without its local files) is
committed to `refs/middle/wip/<ticket-id>` (never the ticket's branch) through a temporary index,
so neither the worktree's index nor its branch moves, and pushed to the shared repository when
there is one. A runner that takes the run over (its own clone, another machine) puts that state
back into its new worktree as uncommitted changes, and the run goes on from there: nothing a
finished turn did is lost with the dead runner's disk. The ref is removed once the ticket's
commit is on its branch and pushed.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.errors import GitError
from orchestrator.killpoints import point
from orchestrator.workspace import git as g
from orchestrator.workspace.worktrees import Workspace, Worktrees, wip_ref

log = logging.getLogger("middle.workspace")

class TurnResult(BaseModel):
    """A finished turn's result as its work-in-progress commit carries it (read back as data,
    strictly: a damaged one is ignored and the turn runs again)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    response: str
    session_id: str | None = None
    cost_usd: float = 0.0
    duration_ms: int = 0
    usage: dict[str, Any] = {}
    num_turns: int = 0


RESULT_LINE = "middle-turn-result: "


def commit_local(worktrees: Worktrees, ws: Workspace, ticket_id: str, run_id: str, turn: int,
                 result: TurnResult | None = None) -> str:
    """Commit the worktree's state (with the turn's result, when given) to the ticket's local
    work-in-progress ref, and return that commit. No store call and no network: it is the first
    thing a finished turn does, so its work and result survive a store outage or a kill after it
    on this machine. Its parent is the branch's head: its tree, what the turns left."""
    from orchestrator.workspace.local_files import excluded

    head = g.out(ws.path, "rev-parse", "HEAD")
    with tempfile.TemporaryDirectory(prefix="middle-wip-") as tmp:
        index = Path(tmp) / "index"
        real = Path(g.out(ws.path, "rev-parse", "--path-format=absolute", "--git-path", "index"))
        if real.is_file():  # a copy keeps git's stat cache: only changed files are read again
            shutil.copyfile(real, index)
        env = {"GIT_INDEX_FILE": str(index)}
        if not real.is_file():
            g.git(ws.path, "read-tree", "HEAD", env=env)
        g.git(ws.path, "add", "-A", "--", ".", *excluded(ws.path), env=env)
        tree = g.git(ws.path, "write-tree", env=env).stdout.strip()
    commit = g.commit_tree(Path(ws.repo), tree, [head], _message(ticket_id, run_id, turn, result))
    with worktrees.locked():
        g.git(ws.repo, "update-ref", "-m", f"middle: turn {turn}", wip_ref(ticket_id), commit)
    point("wip.committed")
    return commit


def push(worktrees: Worktrees, ws: Workspace, ticket_id: str, commit: str) -> None:
    """Push a work-in-progress commit to the shared repository (when there is one), as a
    compare-and-swap on the ref (PushRefused: another runner pushed it since)."""
    if not worktrees.shared:
        return
    with worktrees.locked():
        worktrees.push_ref(Path(ws.repo), commit, wip_ref(ticket_id))
    point("wip.pushed")


def save(worktrees: Worktrees, ws: Workspace, ticket_id: str, run_id: str, turn: int,
         result: TurnResult | None = None) -> str:
    """Commit the worktree's state to the ticket's work-in-progress ref and push it when
    shared; returns that commit."""
    commit = commit_local(worktrees, ws, ticket_id, run_id, turn, result)
    push(worktrees, ws, ticket_id, commit)
    return commit


def _message(ticket_id: str, run_id: str, turn: int, result: TurnResult | None = None) -> str:
    text = f"middle: work in progress of ticket {ticket_id}\n\nrun {run_id}, after turn {turn}\n"
    if result is not None:  # one line of ASCII JSON: the turn's result, for a runner that finds it
        text += "\n" + RESULT_LINE + json.dumps(result.model_dump(), ensure_ascii=True) + "\n"
    return text


def turn_result(worktrees: Worktrees, repo: Path, ticket_id: str, run_id: str, turn: int) -> TurnResult | None:
    """The result of turn `turn` of run `run_id` as a work-in-progress commit carries it (here,
    or as pushed): the turn finished and its work was saved, but its end was not stored (the
    process died, or the store was out of reach). None when no such commit is found."""
    ref = wip_ref(ticket_id)
    with worktrees.locked():
        candidates = [g.ref_commit(repo, ref)]
        if worktrees.shared:
            if g.git(repo, "fetch", "--quiet", worktrees.shared, ref, check=False).returncode == 0:
                candidates.append(g.ref_commit(repo, "FETCH_HEAD"))
    for commit in candidates:
        if commit is None:
            continue
        body = g.out(repo, "log", "-1", "--format=%B", commit)
        if f"\nrun {run_id}, after turn {turn}\n" not in "\n" + body + "\n":
            continue
        for line in body.splitlines():
            if line.startswith(RESULT_LINE):
                try:
                    return TurnResult.model_validate(json.loads(line[len(RESULT_LINE):]))
                except (ValueError, ValidationError) as exc:
                    log.warning("ticket %s: the result of turn %d in its work in progress (%s) is damaged; "
                                "the turn runs again: %s", ticket_id, turn, commit[:10], exc)
    return None


def _of_run(repo: Path, commit: str, run_id: str) -> bool:
    """Whether a work-in-progress commit is this run's (not an earlier run's of the ticket)."""
    return f"\nrun {run_id}, " in "\n" + g.out(repo, "log", "-1", "--format=%B", commit)


def _found(worktrees: Worktrees, repo: Path, ticket_id: str) -> str | None:
    """The ticket's work-in-progress commit: as pushed to the shared repository, else here."""
    ref = wip_ref(ticket_id)
    if worktrees.shared:
        proc = g.git(repo, "fetch", "--quiet", worktrees.shared, ref, check=False)
        if proc.returncode == 0:
            found = g.ref_commit(repo, "FETCH_HEAD")
            worktrees.saw(ref, found)  # this runner's next push of the ref expects it there
            return found
        if "couldn't find remote ref" in proc.stderr:
            worktrees.saw(ref, None)
    return g.ref_commit(repo, ref)


def restore(worktrees: Worktrees, ws: Workspace, ticket_id: str, run_id: str) -> str | None:
    """Put the ticket's last work in progress into `ws` (a worktree a takeover has just made)
    as uncommitted changes; returns what was done, to say, or None when there was nothing to
    restore. The branch first moves to the commit the work began from when that is ahead of it
    (committed by the dead runner, never pushed); a branch already past it (its work committed
    and pushed after that turn) is left as it is."""
    repo = Path(ws.repo)
    with worktrees.locked():
        wip = _found(worktrees, repo, ticket_id)
    if wip is None or not _of_run(repo, wip, run_id):
        return None
    parent = g.ref_commit(repo, f"{wip}^")
    if parent is None:  # not a commit `save` made (a work-in-progress commit has the head as parent)
        log.warning("ticket %s: its work-in-progress ref (%s) has no parent; not restored", ticket_id, wip[:10])
        return None
    head = g.out(ws.path, "rev-parse", "HEAD")
    if parent != head:
        if g.is_ancestor(repo, parent, head):
            return None  # the branch holds that turn's work already, and more
        if not g.is_ancestor(repo, head, parent):
            log.warning("ticket %s: its work in progress (%s) is not on its branch's line; not restored",
                        ticket_id, wip[:10])
            return None
        g.git(ws.path, "reset", "--quiet", "--hard", parent)  # committed there, never pushed
    if g.out(ws.path, "rev-parse", f"{wip}^{{tree}}") == g.out(ws.path, "rev-parse", "HEAD^{tree}"):
        return f"its branch at {parent[:10]}" if parent != head else None
    # The work-in-progress tree into the files, then the index back to the branch's head: the
    # turns' edits are uncommitted changes again, as the dead runner's worktree had them.
    g.git(ws.path, "read-tree", "--reset", "-u", wip)
    g.git(ws.path, "reset", "--quiet")
    return f"its work in progress of the last turn ({wip[:10]})"


def drop(worktrees: Worktrees, ws: Workspace, ticket_id: str) -> None:
    """The ticket's commit is on its branch (and pushed): its work-in-progress ref goes (on the
    shared repository only if it is still what this runner pushed there)."""
    ref = wip_ref(ticket_id)
    with worktrees.locked():
        g.git(ws.repo, "update-ref", "-d", ref, check=False)
        if worktrees.shared:
            try:
                worktrees.push_ref(Path(ws.repo), "", ref)
            except GitError as exc:
                log.warning("could not remove %s from the shared repository: %s", ref, exc)
    point("wip.dropped")


def changed(repo: str | Path, wip: str) -> bool | None:
    """Whether a work-in-progress commit holds edits (its tree is not its parent's); None when
    the commit is not in `repo`."""
    if not g.has_object(Path(repo), wip):
        return None
    return g.out(repo, "rev-parse", f"{wip}^{{tree}}") != g.out(repo, "rev-parse", f"{wip}^^{{tree}}")
