"""Undoing a merged ticket's change in git: the commit that undoes it, the worktree where a revert
that conflicts is resolved, and the check that a revert made by hand really took the change out.

The undo of a merge that moved the base branch from `before` to `after` is a commit on top of
`after` holding the tree of `before`. Applied to the base branch's current commit (a three-way
merge whose merge base is `after`) it takes out exactly what the merge brought. When later work
conflicts with that, the undo is cherry-picked in a worktree of its own,
`<state>/reverts/<ticket-id>` on branch `middle-revert/<ticket-id>`, made from the base branch,
so the user resolves the conflict markers there with git as usual; the branch and worktree
exist only while a revert is unfinished, so git (not a record of ours) says where it stands.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.errors import GitError, TicketError
from orchestrator.workspace import git as g
from orchestrator.workspace.landing import advance, combine
from orchestrator.workspace.worktrees import Worktrees

REVERT_PREFIX = "middle-revert/"  # not under middle/: no ticket id can make a branch clash with it
_FINGERPRINT = "middle-revert-tree"  # in the revert worktree's own git dir: the tree it was left with
_WORD = re.compile(r"\w")


@dataclass
class Undone:
    """What undoing a merged ticket's change did on the base branch, or why it waits."""

    commit: str | None  # the commit that undid it on the base branch, when one was made
    code: str  # one phrase: what happened to the code
    conflicts: list[str] = field(default_factory=list)  # not empty: it waits in `worktree`
    worktree: str | None = None


@dataclass(frozen=True)
class Merged:
    """A merged ticket's change: the base branch went from `before` to `after` when it merged."""

    ticket_id: str
    title: str
    branch: str  # the ticket's branch (middle/<id>)
    repo: Path
    base: str
    before: str
    after: str
    reverted_by: str | None = None  # the revert commit recorded by an earlier `revert`, if any

    def base_commit(self) -> str:
        commit = g.branch_commit(self.repo, self.base)
        if commit is None:
            raise GitError(f"the base branch {self.base!r} no longer exists in {self.repo}: "
                           "nothing was changed")
        return commit


def revert(worktrees: Worktrees, change: Merged, *, publish: str | None = None) -> Undone:
    """Undo the change on the base branch with one revert commit. A revert that conflicts waits
    in the ticket's revert worktree with conflict markers; called again once the user has
    committed the resolution there, it puts that on the base branch and removes the worktree.
    `publish`: the shared repository ([project] repo_url) the base branch is pushed to first."""
    repo, base, tid = change.repo, change.base, change.ticket_id
    with worktrees.locked():
        old = change.base_commit()
        if change.reverted_by and g.has_object(repo, change.reverted_by) and g.is_ancestor(
                repo, change.reverted_by, old):  # it ended before the ticket was marked (a crash)
            return Undone(change.reverted_by, f"its revert {change.reverted_by[:10]} is on {base} already")
        marker = (f"`middle revert {tid}`: undoes the merge of {change.branch} into {base} "
                  f"({change.before[:10]}..{change.after[:10]}).")
        made = None if change.reverted_by else _made_already(repo, change.after, old, marker)
        if made is not None:  # it moved the base and was killed before the ticket recorded it
            return Undone(made, f"its revert {made[:10]} is on {base} already")
        work = RevertWorktree.of(worktrees, repo, tid)
        if work.started():
            landed = _land_resolved(change, work, old, publish)
            if landed is not None:
                return landed
            work.remove()  # nothing committed there (the cherry-pick was given up): start again
        if not g.is_ancestor(repo, change.after, old):
            return Undone(None, f"its merge {change.after[:10]} is not in {base} any more, so no revert "
                                "commit was needed")
        message = g.commit_message(f"Revert \"{change.title}\"", marker)
        undo = undo_commit(repo, change.before, change.after, message)
        merged = g.merge_trees(repo, old, undo)
        if merged.tree is None:
            conflicts = work.open(old, undo)
            if not conflicts:  # git's cherry-pick managed what merge-tree did not
                return _land_resolved(change, work, old, publish) or Undone(None, "nothing to revert")
            return Undone(None, (
                f"cannot revert ticket {tid} cleanly: later changes on {base} touch {', '.join(conflicts)}; "
                f"{base} and your working tree were left as they were. The revert waits in {work.path} "
                f"(branch {work.branch}) with conflict markers: resolve them there and commit (cd "
                f"{work.path} && git add -A && git commit), then `middle revert {tid}` again to put it "
                f"on {base}. Undid it on {base} by hand already? `middle revert {tid} --done`"),
                conflicts=conflicts, worktree=str(work.path))
        if merged.tree == g.out(repo, "rev-parse", f"{old}^{{tree}}"):
            return Undone(None, f"its changes are no longer in {base}, so no revert commit was needed")
        new = g.commit_tree(repo, merged.tree, [old], message)
        paths = advance(repo, base, old, new, action=f"revert ticket {tid}", publish=publish)
    return Undone(new, f"revert commit {new[:10]} on {base} undoes {len(paths)} file(s)")


def _made_already(repo: Path, merged: str, now: str, marker: str) -> str | None:
    """The revert commit a revert made on the base branch (after the merge `merged`, up to
    `now`, first parents only) before it was killed, found by its message's own line."""
    if not g.is_ancestor(repo, merged, now):
        return None
    log = g.out(repo, "log", "--first-parent", "--format=%H%x1f%B%x1e", f"{merged}..{now}")
    for entry in log.split("\x1e"):
        sha, _, body = entry.strip().partition("\x1f")
        if sha and marker in body.split("\n"):
            return sha
    return None


def _land_resolved(change: Merged, work: "RevertWorktree", old: str, publish: str | None) -> Undone | None:
    """Put the revert committed in the revert worktree on the base branch (then remove the
    worktree); None when nothing is committed there that the base branch lacks."""
    repo, base, tid = change.repo, change.base, change.ticket_id
    pending = work.uncommitted()
    if pending:
        unresolved = work.unresolved()
        state = (f"{_names(unresolved)} still conflict{'s' if len(unresolved) == 1 else ''}" if unresolved
                 else f"{_names(pending)} not committed there")
        raise GitError(
            f"the revert of ticket {tid} in {work.path} is not finished: {state}. Resolve the conflict "
            f"markers, commit (cd {work.path} && git add -A && git commit), then `middle revert {tid}` "
            "again. Nothing was changed")
    tip = work.tip()
    if tip is None or g.is_ancestor(repo, tip, old):
        return None
    new, how, conflicts = combine(repo, old, tip, g.commit_message(f"Merge {work.branch}: revert \"{change.title}\""))
    if new is None:
        return Undone(None, (
            f"{base} moved on since the revert of ticket {tid} was started, and conflicts with it in "
            f"{', '.join(conflicts)}; {base} and your working tree were left as they were. Bring {base} "
            f"into the revert (cd {work.path} && git merge {base}, resolve, git add -A && git commit), "
            f"then `middle revert {tid}` again"), conflicts=conflicts, worktree=str(work.path))
    paths = advance(repo, base, old, new, action=f"revert ticket {tid}", publish=publish)
    work.remove()
    return Undone(new, f"the revert resolved in {work.path} is on {base} ({how} {new[:10]}) and undoes "
                       f"{len(paths)} file(s)")


def confirm_undone(worktrees: Worktrees, change: Merged, *, force: bool = False) -> Undone:
    """A revert the user made by hand on the base branch (`middle revert ID --done`): checked
    with `leftovers` (skipped with `force`); an unfinished revert worktree of the ticket is
    removed when middle left it as it is or with `force`, never when it holds commits."""
    repo, base, tid = change.repo, change.base, change.ticket_id
    with worktrees.locked():
        old = change.base_commit()
        work = RevertWorktree.of(worktrees, repo, tid)
        started = work.started()
        tip = work.tip() if started else None
        if tip is not None and not g.is_ancestor(repo, tip, old):
            raise GitError(
                f"the revert of ticket {tid} in {work.path} has commits that are not on {base}: `middle "
                f"revert {tid}` puts them there; or remove it first (git -C {repo} worktree remove --force "
                f"{work.path} && git -C {repo} branch -D {work.branch}). Nothing was changed")
        left = leftovers(repo, change.before, change.after, old)
        if left and not force:
            raise TicketError(
                f"{base} still holds ticket {tid}'s change: {_names([str(x) for x in left])}. Undo it "
                f"there first (or let `middle revert {tid}` without --done make the revert), or add "
                "--force to mark it reverted anyway. Nothing was changed")
        pending = work.uncommitted() if started else []
        if pending and not force and not work.untouched():
            raise GitError(
                f"the revert of ticket {tid} in {work.path} was edited since middle made it and holds changes "
                f"not committed ({_names(pending)}), which --done would delete: commit them there and run "
                f"`middle revert {tid}` to finish that revert instead, or add --force to delete them. "
                "Nothing was changed")
        if started:
            work.remove()
    files = len(g.numstat(repo, change.before, change.after))
    checked = (f"not checked, --force: {base} still holds part of it in {_names([x.path for x in left])}"
               if left else f"checked: {base} keeps none of the lines it added, nor lacks all it removed, "
                            f"in the {files} file(s) it changed")
    return Undone(None, f"undone by hand on {base} ({checked})"
                        + (f"; removed the unfinished revert in {work.path}" if started else ""))


def _names(paths: list[str], most: int = 10) -> str:
    return ", ".join(paths[:most]) + (" …" if len(paths) > most else "")


def undo_commit(repo: Path, before: str, after: str, message: str) -> str:
    """A commit on `after` with the tree of `before`: the merge's change, backwards."""
    return g.commit_tree(repo, g.out(repo, "rev-parse", f"{before}^{{tree}}"), [after], message)


@dataclass(frozen=True)
class RevertWorktree:
    """The worktree and branch where an unfinished revert of one ticket waits to be resolved."""

    repo: Path
    path: Path
    branch: str

    @classmethod
    def of(cls, worktrees: Worktrees, repo: Path, ticket_id: str) -> "RevertWorktree":
        """The ticket's revert worktree: `<state>/reverts/<id>`, beside the tickets' worktrees."""
        return cls(repo, worktrees.root.parent / "reverts" / ticket_id, REVERT_PREFIX + ticket_id)

    def started(self) -> bool:
        return g.branch_commit(self.repo, self.branch) is not None

    def tip(self) -> str | None:
        return g.branch_commit(self.repo, self.branch)

    def uncommitted(self) -> list[str]:
        """Paths not committed there: conflicts not resolved, or resolved and not committed."""
        return sorted(g.dirty_paths(self.path)) if self.path.is_dir() else []

    def unresolved(self) -> list[str]:
        """Paths git still marks as conflicting there (not `git add`-ed since)."""
        if not self.path.is_dir():
            return []
        names = g.git(self.path, "diff", "--name-only", "--diff-filter=U", "-z").stdout.split("\0")
        return sorted(n for n in names if n)

    def open(self, start: str, undo: str) -> list[str]:
        """Make the worktree at `start` (the base branch's commit) and cherry-pick `undo` there,
        leaving its conflict markers; returns the paths that conflict."""
        self.remove()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        g.git(self.repo, "worktree", "add", "--quiet", "-b", self.branch, str(self.path), start)
        proc = g.git(self.path, *g.author_args(self.repo), "-c", "commit.gpgsign=false", "cherry-pick",
                     undo, check=False)
        conflicts = self.unresolved()
        if proc.returncode != 0 and not conflicts:  # failed for another reason: leave nothing behind
            self.remove()
            raise GitError(f"git cherry-pick failed in {self.path}: {proc.stderr.strip() or proc.returncode}")
        Path(self._git_path(_FINGERPRINT)).write_text(self._tree() + "\n", encoding="utf-8")
        return conflicts

    def untouched(self) -> bool:
        """Whether its files are as `open` left them (nobody has resolved or edited anything)."""
        try:
            recorded = Path(self._git_path(_FINGERPRINT)).read_text(encoding="utf-8").strip()
        except (OSError, ValueError, GitError):
            return False  # no record (or a damaged one): treat it as the user's work
        return self.path.is_dir() and recorded == self._tree()

    def remove(self) -> None:
        if self.path.exists():
            g.git(self.repo, "worktree", "remove", "--force", "--force", str(self.path), check=False)
            if self.path.exists():
                shutil.rmtree(self.path, ignore_errors=True)
        g.git(self.repo, "worktree", "prune", check=False)
        if self.started():
            g.git(self.repo, "branch", "-D", self.branch)

    def _git_path(self, name: str) -> str:
        return g.out(self.path, "rev-parse", "--path-format=absolute", "--git-path", name)

    def _tree(self) -> str:
        """The tree of every file in the worktree as it is now (tracked, edited, untracked; not
        ignored), written through a copy of its index so its own index stays as it is."""
        fd, index = tempfile.mkstemp(prefix="middle-revert-index")
        os.close(fd)
        try:
            shutil.copyfile(self._git_path("index"), index)
            env = {"GIT_INDEX_FILE": index}
            g.git(self.path, "add", "--all", env=env)
            return g.git(self.path, "write-tree", env=env).stdout.strip()
        finally:
            os.unlink(index)


@dataclass(frozen=True)
class Leftover:
    """A file where a commit still holds part of a ticket's change, with one line as evidence."""

    path: str
    why: str

    def __str__(self) -> str:
        return f"{self.path} ({self.why})"


def leftovers(repo: Path, before: str, after: str, commit: str) -> list[Leftover]:
    """Where `commit` still holds the change that took the base from `before` to `after`.

    Per file the change touched: a line it added (one with a letter or digit, not in the file
    before) still there; for a change that only removed lines, none of them back; a file it
    deleted still absent; a binary file still as it made it. Later work may have rewritten those
    lines, so an empty list means "no trace of the change's own lines", not "as before it"."""
    found = []
    for row in g.numstat(repo, before, after):
        path = str(row["path"])
        if row["added"] is None:  # binary: compare the blobs
            if _blob_id(repo, commit, path) is not None and _blob_id(repo, commit, path) == _blob_id(repo, after, path):
                found.append(Leftover(path, "the binary file is as the ticket made it"))
            continue
        old, new, now = (_text(repo, c, path) for c in (before, after, commit))
        if new is None:
            if now is None:
                found.append(Leftover(path, "the ticket deleted it and it is still gone"))
            continue
        added, removed = _lines(new) - _lines(old), _lines(old) - _lines(new)
        current = _lines(now)
        if added and added & current:
            found.append(Leftover(path, f"still has `{min(added & current)}`"))
        elif not added and removed and now is not None and not removed & current:
            found.append(Leftover(path, f"still lacks `{min(removed)}`"))
    return found


def _text(repo: Path, commit: str, path: str) -> str | None:
    proc = g.git(repo, "cat-file", "-p", f"{commit}:{path}", check=False)
    return proc.stdout if proc.returncode == 0 else None


def _blob_id(repo: Path, commit: str, path: str) -> str | None:
    proc = g.git(repo, "rev-parse", "--verify", "--quiet", f"{commit}:{path}", check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _lines(text: str | None) -> set[str]:
    """The lines that say something (a bracket or a blank line alone proves nothing), stripped."""
    return {line.strip() for line in (text or "").splitlines() if _WORD.search(line)}
