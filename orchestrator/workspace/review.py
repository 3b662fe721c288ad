"""Review a ticket's change and act on it: diff, merge, discard, revert (commands, API, dashboard).

Merges and reverts are computed without touching any working tree (`git merge-tree`), so a
conflict leaves the base branch and the user's files exactly as they were. The base branch then
moves in one step: a fast-forward of the user's working tree when the branch is checked out there
(refused, before anything changes, when the user has uncommitted changes in a file it would
write), else a compare-and-swap of the ref.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import GitError, TicketError
from orchestrator.lifecycle.next_steps import advise
from orchestrator.workspace import git as g
from orchestrator.workspace.worktrees import Worktrees, branch_name

log = logging.getLogger("middle.review")


@dataclass
class ReviewResult:
    """What a review action did, for the CLI line and the API's JSON."""

    ticket_id: str
    status: str  # the ticket's status afterwards
    message: str  # one sentence: what happened to the code and to memory
    commit: str | None = None
    conflicts: list[str] = field(default_factory=list)
    memory_docs_deleted: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"ticket_id": self.ticket_id, "status": self.status, "message": self.message,
                "commit": self.commit, "conflicts": self.conflicts,
                "memory_docs_deleted": self.memory_docs_deleted}


def split_patch(patch: str) -> list[dict[str, str]]:
    """A unified diff cut into one {"path", "patch"} per file (for the ticket page)."""
    files: list[dict[str, str]] = []
    for chunk in patch.split("\ndiff --git ")[0:]:
        if not chunk.strip():
            continue
        text = chunk if chunk.startswith("diff --git ") else "diff --git " + chunk
        header = text.splitlines()[0]
        path = header.split(" b/", 1)[-1] if " b/" in header else header
        files.append({"path": path, "patch": text.rstrip("\n") + "\n"})
    return files


class Review:
    """Diff, merge, discard and revert of tickets, on the ticket store and the repository."""

    def __init__(self, store: Any, worktrees: Worktrees, memory: Any = None, *,
                 local_project: Path | None = None, repo_url: str | None = None):
        """`memory`: the memory facade, or a function returning it (built only when needed).
        `local_project` and `repo_url`: a ticket that ran on another machine (a `middle worker`)
        is reviewed in this project's repository, its branch fetched from the shared remote."""
        self.store, self.worktrees, self._memory = store, worktrees, memory
        self.local_project, self.repo_url = local_project, repo_url

    # -- reading -----------------------------------------------------------------------------
    def _run(self, ticket_id: str) -> dict[str, Any]:
        ticket = self.store.get_ticket(ticket_id)
        run = self.store.latest_run(ticket_id)
        if run is None:
            raise TicketError(f"ticket {ticket_id!r} has never run, so it has no change to review: "
                              f"{advise(self.store, ticket_id, 'diff')}")
        if run.get("isolation") != "worktree" or not run.get("branch"):
            raise TicketError(
                f"ticket {ticket.id!r} ran in the project directory itself ([project] isolation = "
                f"\"none\"), so it has no branch of its own: {advise(self.store, ticket_id, 'merge')}")
        return self._here(run)

    def _here(self, run: dict[str, Any]) -> dict[str, Any]:
        """The run as this machine sees it. One that ran in another machine's clone (a worker) is
        reviewed in this project's repository, with its branch fetched from [project] repo_url."""
        if not run.get("repo"):
            return run
        if Path(run["repo"]).is_dir() and not self.repo_url:
            return run  # one machine: the repository the ticket ran in is here
        try:
            local = g.toplevel(self.local_project) if self.local_project and self.local_project.is_dir() else None
        except GitError:  # this project's folder is not a repository (its tickets name another)
            local = None
        if local is not None and Path(run["repo"]) == local:
            return run
        if not self.repo_url or local is None:
            if Path(run["repo"]).is_dir():  # another repository on this machine (a ticket's `path:`)
                return run
            raise TicketError(
                f"ticket {run['ticket_id']!r} ran in {run['repo']}, which is not on this machine: set "
                "[project] repo_url to the shared repository its branch was pushed to")
        repo = local
        g.git(repo, "fetch", "--quiet", self.repo_url, f"+refs/heads/{run['branch']}:refs/heads/{run['branch']}",
              check=False)  # gone from the remote (merged or discarded elsewhere): no tip, said so below
        return {**run, "repo": str(repo), "worktree": None}

    def _tip(self, run: dict[str, Any]) -> str | None:
        """The ticket's tip: its branch (which the user may have added commits to, merged the
        base into or rebased), else the commit recorded when it completed."""
        if not run.get("repo"):
            return run.get("head_commit")
        tip = g.branch_commit(Path(run["repo"]), run["branch"])
        if tip and tip != run["base_commit"]:
            return tip
        return run.get("head_commit")

    def _merged_range(self, run: dict[str, Any]) -> tuple[str, str]:
        """What the merge did to the base branch: (its commit before, its commit after). Runs
        merged before that was recorded: a merge commit's first parent, else the ticket's start."""
        after = run["merge_commit"]
        if run.get("premerge_commit"):
            return run["premerge_commit"], after
        parents = g.out(Path(run["repo"]), "rev-list", "--parents", "-n", "1", after).split()[1:]
        if len(parents) == 2 and parents[1] == run.get("head_commit"):
            return parents[0], after
        return run["base_commit"], after

    def _would_merge(self, repo: Path, run: dict[str, Any], tip: str) -> tuple[str, str]:
        """What merging the tip would do to the base branch now: (base commit, merged tree), or
        when it conflicts the tip against its merge base (the ticket's side of the conflict). A
        branch that merged the base in or was rebased onto it shows only its own change."""
        current = g.branch_commit(repo, run["base_branch"])
        if current is None:
            return run["base_commit"], tip
        merged = g.merge_trees(repo, current, tip)
        if merged.tree is not None:
            return current, merged.tree
        return g.merge_base(repo, current, tip) or run["base_commit"], tip

    def diff(self, ticket_id: str, *, stat: bool = False) -> dict[str, Any]:
        """The ticket's change: what merging it did to the base branch (merged), what merging it
        would do now (committed), or what its worktree holds (while it runs or after it failed)."""
        run = self._run(ticket_id)
        repo = Path(run["repo"])
        merged = bool(run.get("merge_commit"))
        tip = run.get("head_commit") if merged else self._tip(run)
        fmt = ["--stat"] if stat else ["--no-color", "--no-ext-diff"]
        against = run["base_commit"]
        if tip:
            against, to = self._merged_range(run) if merged else self._would_merge(repo, run, tip)
            text = g.git(repo, "diff", *fmt, against, to).stdout
            files = g.numstat(repo, against, to)
        elif run.get("worktree") and Path(run["worktree"]).is_dir():
            wt = run["worktree"]
            against = g.merge_base(Path(wt), run["base_branch"], "HEAD") or against  # the base merged in
            g.git(wt, "add", "--all", "--intent-to-add", check=False)  # new files show in the diff
            text = g.git(wt, "diff", *fmt, against).stdout
            files = g.numstat(wt, against)
        else:
            text, files = "", []
        return {"ticket_id": ticket_id, "base_branch": run["base_branch"], "base_commit": run["base_commit"],
                "against": against, "branch": run["branch"], "commit": tip, "merged": merged,
                "files": files, "text": text}

    # -- merging -----------------------------------------------------------------------------
    def merge(self, ticket_id: str) -> ReviewResult:
        ticket = self.store.get_ticket(ticket_id)
        status = ticket.status.value
        if status == "merged":
            return ReviewResult(ticket_id, status, f"ticket {ticket_id} is already merged")
        if status not in ("complete", "conflict"):
            raise TicketError(f"ticket {ticket_id!r} is {status}: only a complete ticket can be merged; "
                              f"{advise(self.store, ticket_id, 'merge')}")
        run = self._run(ticket_id)
        repo, base = Path(run["repo"]), run["base_branch"]
        self._refuse_unsaved(ticket_id, run)
        with self.worktrees.locked():
            tip = self._tip(run)
            if tip is None:
                self._finish_merge(ticket_id, run, None)
                return ReviewResult(ticket_id, "merged", f"ticket {ticket_id} changed no files: nothing "
                                    f"to merge into {base}; marked merged")
            old = g.branch_commit(repo, base)
            if old is None:
                raise GitError(f"the base branch {base!r} no longer exists in {repo}: recreate it, "
                               "then merge again")
            if g.is_ancestor(repo, tip, old):
                self._finish_merge(ticket_id, run, old, tip, premerge=old)
                return ReviewResult(ticket_id, "merged", f"ticket {ticket_id}'s commits are already in "
                                    f"{base}; marked merged", old)
            if g.is_ancestor(repo, old, tip):
                new, how = tip, "fast-forward"
            else:
                merged = g.merge_trees(repo, old, tip)
                if merged.tree is None:
                    reason = (f"merging into {base} conflicts in {', '.join(merged.conflicts)}; {base} and "
                              "your working tree were left as they were")
                    self.store.set_status(ticket_id, "conflict", reason)
                    return ReviewResult(
                        ticket_id, "conflict",
                        f"{reason}. Resolve it on the ticket's branch (cd {run['worktree']} && git merge "
                        f"{base}, fix, commit), then `middle merge {ticket_id}` again; or discard it "
                        f"(`middle discard {ticket_id}`) and run it again", conflicts=merged.conflicts)
                new = g.commit_tree(repo, merged.tree, [old, tip],
                                    g.commit_message(f"Merge {branch_name(ticket_id)}: {ticket.title}"))
                how = "merge commit"
            paths = self._advance_base(repo, base, old, new, action=f"merge ticket {ticket_id}")
            self._finish_merge(ticket_id, run, new, tip, premerge=old)
        return ReviewResult(ticket_id, "merged", f"merged ticket {ticket_id} into {base} ({how} "
                            f"{new[:10]}, {len(paths)} file(s))", new)

    def _refuse_unsaved(self, ticket_id: str, run: dict[str, Any]) -> None:
        """Merging removes the ticket's worktree: refuse while it holds edits not committed on
        its branch (e.g. a conflict fixed but not committed), which would be lost."""
        wt = run.get("worktree")
        if not wt or not Path(wt).is_dir():
            return
        dirty = sorted(g.dirty_paths(Path(wt)))
        if dirty:
            raise TicketError(
                f"ticket {ticket_id!r}'s worktree {wt} has changes not committed on its branch "
                f"({', '.join(dirty[:10])}{' …' if len(dirty) > 10 else ''}): commit them there "
                f"(cd {wt} && git add -A && git commit), or drop them, then `middle merge {ticket_id}` "
                "again. Nothing was changed")

    def _finish_merge(self, ticket_id: str, run: dict[str, Any], merge_commit: str | None,
                      tip: str | None = None, *, premerge: str | None = None) -> None:
        """Record the merge: the base moved from `premerge` to `merge_commit`, and that step (not
        the branch's history, which may hold the base merged in) is the ticket's change."""
        fields: dict[str, Any] = {"merge_commit": merge_commit or "", "premerge_commit": premerge}
        if tip and tip != run.get("head_commit"):
            fields["head_commit"] = tip
        if premerge and merge_commit and premerge != merge_commit:
            fields["changes"] = g.numstat(Path(run["repo"]), premerge, merge_commit)
        self.store.set_run_fields(run["id"], **fields)
        self.store.set_status(ticket_id, "merged", f"merged into {run['base_branch']}"
                              + (f" at {merge_commit[:10]}" if merge_commit else " (no changes)"))
        self.worktrees.remove(run["repo"], ticket_id)

    def _advance_base(self, repo: Path, base: str, old: str, new: str, *, action: str) -> list[str]:
        """Move the base branch from `old` to its descendant `new`; returns the paths written."""
        paths = [str(r["path"]) for r in g.numstat(repo, old, new)]
        where = g.checked_out_at(repo, base)
        if where is None:
            g.git(repo, "update-ref", "-m", f"middle: {action}", f"refs/heads/{base}", new, old)
            return paths
        clash = sorted(g.dirty_paths(where) & set(paths))
        if clash:
            raise GitError(
                f"cannot {action}: your uncommitted changes in {where} to {', '.join(clash[:10])}"
                f"{' …' if len(clash) > 10 else ''} would be overwritten. Nothing was changed: commit "
                "or stash them, then try again")
        proc = g.git(where, "merge", "--ff-only", "--quiet", new, check=False)
        if proc.returncode != 0:
            raise GitError(f"cannot {action}: git refused to update {where} ({proc.stderr.strip()}); "
                           f"{base} was left as it was")
        return paths

    # -- discarding and reverting ------------------------------------------------------------
    def discard(self, ticket_id: str) -> ReviewResult:
        ticket = self.store.get_ticket(ticket_id)
        status = ticket.status.value
        if status == "running":
            raise TicketError(f"ticket {ticket_id!r} is running: {advise(self.store, ticket_id, 'discard')}")
        if status == "merged":
            raise TicketError(f"ticket {ticket_id!r} is merged: undo it with `middle revert {ticket_id}`")
        if status == "discarded":
            return ReviewResult(ticket_id, status, f"ticket {ticket_id} is already discarded")
        run = self.store.latest_run(ticket_id)
        if run is None:
            # Never run: no worktree, branch or memory doc; it is only marked, so no run starts it
            # (`middle run ID` still can). Compared in the same write: a runner may claim it meanwhile.
            if self.store.set_status_if(ticket_id, ("pending",), "discarded", "discarded by hand; it never ran"):
                return ReviewResult(ticket_id, "discarded", f"discarded ticket {ticket_id}: it never ran, so "
                                    "there was no work to remove; no run starts it now")
            raise TicketError(f"ticket {ticket_id!r} is {self.store.get_ticket(ticket_id).status.value} now: "
                              f"{advise(self.store, ticket_id, 'discard')}")
        run = self._here(run) if run.get("isolation") == "worktree" and run.get("branch") else run
        code = "it ran in place (isolation = \"none\"), so its edits are left in the project"
        if run.get("isolation") == "worktree" and run.get("branch"):
            changed = bool(self._tip(run)) if run.get("repo") else False
            self.worktrees.remove(run["repo"], ticket_id)
            code = (f"removed its worktree and branch {run['branch']}" if changed
                    else "it changed no files; removed its worktree")
        removed, said = self.forget(ticket_id)
        self.store.set_status(ticket_id, "discarded", f"discarded; {said}")
        return ReviewResult(ticket_id, "discarded", f"discarded ticket {ticket_id}: {code}; {said}",
                            memory_docs_deleted=removed)

    def revert(self, ticket_id: str) -> ReviewResult:
        ticket = self.store.get_ticket(ticket_id)
        status = ticket.status.value
        run = self.store.latest_run(ticket_id)
        if run is None:
            raise TicketError(f"ticket {ticket_id!r} has never run, so there is nothing to revert; "
                              f"{advise(self.store, ticket_id, 'revert')}")
        if status == "running":
            raise TicketError(f"ticket {ticket_id!r} is running: {advise(self.store, ticket_id, 'revert')}")
        if status in ("failed", "interrupted") and not self.store.memory_docs(ticket_id):
            raise TicketError(
                f"ticket {ticket_id!r} is {status} and was never merged or indexed, so there is nothing "
                f"to revert: {advise(self.store, ticket_id, 'revert')}")
        if status == "reverted":
            return ReviewResult(ticket_id, status, f"ticket {ticket_id} is already reverted")
        if run.get("isolation") != "worktree":
            removed, said = self.forget(ticket_id)
            self.store.set_status(ticket_id, "reverted", f"reverted; {said}")
            return ReviewResult(ticket_id, "reverted", f"reverted ticket {ticket_id}: {said}; its edits "
                                "were made in place (isolation = \"none\") and are not undone: use git "
                                "for that", memory_docs_deleted=removed)
        if status != "merged":
            return self.discard(ticket_id)
        commit, code = self._revert_commit(ticket, self._here(run))
        removed, said = self.forget(ticket_id)
        if commit:
            self.store.set_run_fields(run["id"], revert_commit=commit)
        self.store.set_status(ticket_id, "reverted", f"{code}; {said}")
        return ReviewResult(ticket_id, "reverted", f"reverted ticket {ticket_id}: {code}; {said}", commit,
                            memory_docs_deleted=removed)

    def _revert_commit(self, ticket: Any, run: dict[str, Any]) -> tuple[str | None, str]:
        repo, base = Path(run["repo"]), run["base_branch"]
        if not run.get("head_commit") or not run.get("merge_commit"):
            return None, "it changed no files, so no code was reverted"
        before, after = self._merged_range(run)
        if before == after:
            return None, (f"its commits were already in {base} when it was marked merged, so merging "
                          "it changed nothing there and no revert commit was made")
        with self.worktrees.locked():
            old = g.branch_commit(repo, base)
            if old is None:
                raise GitError(f"the base branch {base!r} no longer exists in {repo}: nothing was changed")
            if not g.is_ancestor(repo, after, old):
                return None, f"its merge {after[:10]} is not in {base} any more, so no revert commit was needed"
            # Undo exactly what the merge did (before -> after), never the branch's own history,
            # which may hold the base merged in: a commit on top of `after` that restores the
            # tree of `before`, merged into the base (their merge base is `after`), kept with the
            # base as its only parent. git 2.38's merge-tree needs no working tree.
            undo = g.commit_tree(repo, g.out(repo, "rev-parse", f"{before}^{{tree}}"), [after], "undo\n")
            merged = g.merge_trees(repo, old, undo)
            if merged.tree is None:
                raise GitError(
                    f"cannot revert ticket {ticket.id} cleanly: later changes on {base} touch "
                    f"{', '.join(merged.conflicts)}. Nothing was changed; undo its merge by hand "
                    f"(`git diff {after[:10]} {before[:10]} | git apply -3`, fix, commit), then "
                    f"`middle revert {ticket.id}` again to drop its memory")
            if merged.tree == g.out(repo, "rev-parse", f"{old}^{{tree}}"):
                return None, f"its changes are no longer in {base}, so no revert commit was needed"
            message = g.commit_message(
                f"Revert \"{ticket.title}\"", f"`middle revert {ticket.id}`: undoes the merge of "
                f"{run['branch']} into {base} ({before[:10]}..{after[:10]}).")
            new = g.commit_tree(repo, merged.tree, [old], message)
            paths = self._advance_base(repo, base, old, new, action=f"revert ticket {ticket.id}")
        return new, f"revert commit {new[:10]} on {base} undoes {len(paths)} file(s)"

    def forget(self, ticket_id: str) -> tuple[int, str]:
        """Delete the ticket's indexed docs from memory (exact strings), from whichever of the
        project's stores holds them (the backend may have changed in config since they were
        indexed); returns how many, and a line for the user saying from where."""
        ticket = self.store.get_ticket(ticket_id)
        docs = self.store.memory_docs(ticket_id)
        if not docs:
            return 0, "0 memory doc(s) deleted"
        memory = self._memory() if callable(self._memory) else self._memory
        if memory is None:
            raise TicketError(
                f"ticket {ticket_id!r} has {len(docs)} indexed memory doc(s) but memory is off: "
                "set [memory] save_dir (or MEMORY_SAVE_DIR) to the store they were indexed in")
        from orchestrator.memory.facade import MemoryFacade

        if isinstance(memory, MemoryFacade):
            from orchestrator.memory.stores import forget

            report = forget(memory, ticket.project_id, docs, self.store.memory_doc_backends(ticket_id))
            removed, said = report.total, report.describe()
        else:  # a bare backend-like object (the Python API's own memory)
            removed = memory.delete(ticket.project_id, docs)
            said = f"{removed} memory doc(s) deleted"
        self.store.mark_memory_docs_deleted(ticket_id)
        return removed, said
