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

import logging
import shutil
import tempfile
from pathlib import Path

from orchestrator.workspace import git as g
from orchestrator.workspace.worktrees import Workspace, Worktrees, wip_ref

log = logging.getLogger("middle.workspace")

def save(worktrees: Worktrees, ws: Workspace, ticket_id: str, run_id: str, turn: int) -> str:
    """Commit the worktree's state to the ticket's work-in-progress ref (pushed when shared);
    returns that commit. Its parent is the branch's head: its tree, what the turns left."""
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
    commit = g.commit_tree(Path(ws.repo), tree, [head], _message(ticket_id, run_id, turn))
    ref = wip_ref(ticket_id)
    with worktrees.locked():
        g.git(ws.repo, "update-ref", "-m", f"middle: turn {turn}", ref, commit)
        if worktrees.shared:
            g.git(ws.repo, "push", "--quiet", "--force", worktrees.shared, f"{commit}:{ref}")
    return commit


def _message(ticket_id: str, run_id: str, turn: int) -> str:
    return f"middle: work in progress of ticket {ticket_id}\n\nrun {run_id}, after turn {turn}\n"


def _of_run(repo: Path, commit: str, run_id: str) -> bool:
    """Whether a work-in-progress commit is this run's (not an earlier run's of the ticket)."""
    return f"\nrun {run_id}, " in "\n" + g.out(repo, "log", "-1", "--format=%B", commit)


def _found(worktrees: Worktrees, repo: Path, ticket_id: str) -> str | None:
    """The ticket's work-in-progress commit: as pushed to the shared repository, else here."""
    ref = wip_ref(ticket_id)
    if worktrees.shared:
        proc = g.git(repo, "fetch", "--quiet", worktrees.shared, ref, check=False)
        if proc.returncode == 0:
            return g.ref_commit(repo, "FETCH_HEAD")
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
    """The ticket's commit is on its branch (and pushed): its work-in-progress ref goes."""
    ref = wip_ref(ticket_id)
    with worktrees.locked():
        g.git(ws.repo, "update-ref", "-d", ref, check=False)
        if worktrees.shared:
            proc = g.git(ws.repo, "push", "--quiet", worktrees.shared, f":{ref}", check=False)
            if proc.returncode != 0 and "remote ref does not exist" not in proc.stderr:
                log.warning("could not remove %s from the shared repository: %s", ref, proc.stderr.strip())


def changed(repo: str | Path, wip: str) -> bool | None:
    """Whether a work-in-progress commit holds edits (its tree is not its parent's); None when
    the commit is not in `repo`."""
    if not g.has_object(Path(repo), wip):
        return None
    return g.out(repo, "rev-parse", f"{wip}^{{tree}}") != g.out(repo, "rev-parse", f"{wip}^^{{tree}}")
