"""Review a ticket's change and act on it: diff, merge, discard, revert (commands, API, dashboard).

Merges and reverts are computed without touching any working tree (`git merge-tree`), so a
conflict leaves the base branch and the user's files exactly as they were; the base branch then
moves in one step (orchestrator.workspace.landing). A merge that conflicts is resolved on the
ticket's branch, a revert that conflicts in a worktree of its own (orchestrator.workspace.undo).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.errors import GitError, TicketError
from orchestrator.killpoints import point
from orchestrator.lifecycle.next_steps import advise
from orchestrator.workspace import git as g
from orchestrator.workspace import undo
from orchestrator.workspace.landing import advance, combine, push_base
from orchestrator.workspace.worktrees import Worktrees, branch_name
from tickets.deps import dependents

if TYPE_CHECKING:
    from tickets.store import TicketStore

log = logging.getLogger("middle.review")


@dataclass
class ReviewResult:
    """What a review action did, for the CLI line and the API's JSON."""

    ticket_id: str
    status: str  # the ticket's status afterwards
    message: str  # one sentence: what happened to the code and to memory
    commit: str | None = None
    conflicts: list[str] = field(default_factory=list)  # not empty: nothing changed, resolve them
    memory_docs_deleted: int = 0
    worktree: str | None = None  # where a revert that conflicts waits to be resolved
    warnings: list[str] = field(default_factory=list)  # e.g. a merged ticket depends on a reverted one

    def to_dict(self) -> dict[str, Any]:
        return {"ticket_id": self.ticket_id, "status": self.status, "message": self.message,
                "commit": self.commit, "conflicts": self.conflicts,
                "memory_docs_deleted": self.memory_docs_deleted, "worktree": self.worktree,
                "warnings": self.warnings}


class UntrackedFiles(TicketError):
    """Discarding would delete files in the ticket's worktree that git does not track (`paths`)."""

    def __init__(self, message: str, paths: list[str]):
        super().__init__(message)
        self.paths = paths


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

    def __init__(self, store: TicketStore, worktrees: Worktrees, memory: Any = None, *,
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

    def _here(self, run: Mapping[str, Any]) -> dict[str, Any]:
        """The run as this machine sees it. One that ran in another machine's clone (a worker) is
        reviewed in this project's repository, with its branch fetched from [project] repo_url."""
        if not run.get("repo"):
            return dict(run)
        if Path(run["repo"]).is_dir() and not self.repo_url:
            return dict(run)  # one machine: the repository the ticket ran in is here
        try:
            local = g.toplevel(self.local_project) if self.local_project and self.local_project.is_dir() else None
        except GitError:  # this project's folder is not a repository (its tickets name another)
            local = None
        if local is not None and Path(run["repo"]) == local:
            return dict(run)
        if not self.repo_url or local is None:
            if Path(run["repo"]).is_dir():  # another repository on this machine (a ticket's `path:`)
                return dict(run)
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
    def merge(self, ticket_id: str, *, despite_check: str | None = None, by: str = "") -> ReviewResult:
        """Merge a complete ticket; with `despite_check` (the person's reason, `by` them), a ticket
        whose check still failed after its rounds, its work as committed on its branch: the gate's
        way out for a person who judges the failure is not the ticket's (a flaky test, a check
        that is wrong), recorded with who and why."""
        ticket = self.store.get_ticket(ticket_id)
        status = ticket.status.value
        if status == "merged":
            return ReviewResult(ticket_id, status, f"ticket {ticket_id} is already merged")
        # --despite-check on a ticket that did not fail on its check (complete, pending) is refused,
        # not taken as a plain merge: the reason the person gave would be dropped unsaid
        overriding = despite_check is not None
        reason = (despite_check or "").strip()
        if overriding:
            self._may_override(ticket_id, reason)
        elif status not in ("complete", "conflict"):
            raise TicketError(f"ticket {ticket_id!r} is {status}: only a complete ticket can be merged; "
                              f"{advise(self.store, ticket_id, 'merge')}")
        run = self._run(ticket_id)
        if not overriding:
            return self._merge_run(ticket_id, ticket, run)
        self._note_override(ticket_id, run, by, reason)
        why = f" despite its failing check (by {by or 'you'}: {reason})"
        result = self._merge_run(ticket_id, ticket, run, why=why)
        return ReviewResult(ticket_id, result.status, result.message + (why if result.status == "merged" else ""),
                            result.commit, conflicts=result.conflicts)

    def _may_override(self, ticket_id: str, reason: str) -> None:
        """`--despite-check` is for a ticket whose check failed with its work kept, and says why."""
        from orchestrator.lifecycle.next_steps import situation

        if situation(self.store, ticket_id) != "failed-check":
            raise TicketError(f"ticket {ticket_id!r} did not fail on its check, so --despite-check does not "
                              f"apply; {advise(self.store, ticket_id, 'merge')}")
        if not reason:
            raise TicketError("--despite-check needs your reason, recorded with the merge: "
                              f"`middle merge {ticket_id} --despite-check \"the failing test is flaky\"`")

    def _note_override(self, ticket_id: str, run: dict[str, Any], by: str, reason: str) -> None:
        """The person's decision, in the run's log before anything moves (once: a merge stopped
        and run again does not record it twice)."""
        text = f"check overridden by {by or 'you'}: {reason}"
        if any(e["kind"] == "note" and e["data"].get("check_overridden") == {"by": by, "reason": reason}
               for e in self.store.list_events(run_id=run["id"], limit=100_000)):
            return
        self.store.add_event(run["id"], ticket_id, "note",
                             {"text": text, "check_overridden": {"by": by, "reason": reason}})

    def _merge_run(self, ticket_id: str, ticket: Any, run: dict[str, Any], *, why: str = "") -> ReviewResult:
        """Merge the run's branch into its base (`why`: what the merged status adds)."""
        repo, base = Path(run["repo"]), run["base_branch"]
        self._refuse_unsaved(ticket_id, run)
        with self.worktrees.locked():
            tip = self._tip(run)
            if tip is None:
                self._finish_merge(ticket_id, run, None, why=why)
                return ReviewResult(ticket_id, "merged", f"ticket {ticket_id} changed no files: nothing "
                                    f"to merge into {base}; marked merged")
            old = g.branch_commit(repo, base)
            if old is None:
                raise GitError(f"the base branch {base!r} no longer exists in {repo}: recreate it, "
                               "then merge again")
            if g.is_ancestor(repo, tip, old):
                if self.repo_url:  # the team's base branch must hold it too before it counts as merged
                    push_base(repo, self.repo_url, base, old, action=f"merge ticket {ticket_id}", holding=tip)
                premerge, merged_at = self._killed_merge(repo, run, tip, old) or (old, old)
                self._finish_merge(ticket_id, run, merged_at, tip, premerge=premerge, why=why)
                return ReviewResult(ticket_id, "merged", f"ticket {ticket_id}'s commits are already in "
                                    f"{base}{self._pushed(base)}; marked merged", old)
            new, how, conflicts = combine(
                repo, old, tip, g.commit_message(f"Merge {branch_name(ticket_id)}: {ticket.title}"))
            if new is None:
                reason = (f"merging into {base} conflicts in {', '.join(conflicts)}; {base} and "
                          "your working tree were left as they were")
                self.store.set_status(ticket_id, "conflict", reason)
                return ReviewResult(
                    ticket_id, "conflict",
                    f"{reason}. Resolve it on the ticket's branch (cd {run['worktree']} && git merge "
                    f"{base}, fix, commit), then `middle merge {ticket_id}` again; or discard it "
                    f"(`middle discard {ticket_id}`) and run it again", conflicts=conflicts)
            # Where the base was, recorded before it moves: a merge killed after moving it is
            # finished by `middle merge` again with the step it made (else that run would record
            # an empty step, and a revert of the ticket would undo nothing).
            self.store.set_run_fields(run["id"], premerge_commit=old)
            paths = advance(repo, base, old, new, action=f"merge ticket {ticket_id}", publish=self.repo_url)
            self._finish_merge(ticket_id, run, new, tip, premerge=old, why=why)
        return ReviewResult(ticket_id, "merged", f"merged ticket {ticket_id} into {base} ({how} "
                            f"{new[:10]}, {len(paths)} file(s)){self._pushed(base)}", new)

    @staticmethod
    def _killed_merge(repo: Path, run: dict[str, Any], tip: str, now: str) -> tuple[str, str] | None:
        """(base before, the commit that brought the tip in) of a merge that moved the base
        branch and was killed before it was recorded: the base recorded before it moved
        (premerge_commit, which did not hold the tip) and the first commit after it on the base's
        first-parent line that holds the tip (the merge commit, or the tip itself when it was a
        fast-forward). None when no such merge was started."""
        before = run.get("premerge_commit")
        if (not before or not g.has_object(repo, before) or g.is_ancestor(repo, tip, before)
                or not g.is_ancestor(repo, before, now)):
            return None
        for commit in g.out(repo, "rev-list", "--first-parent", "--reverse", f"{before}..{now}").split():
            if g.is_ancestor(repo, tip, commit):
                return before, commit
        return None

    def _pushed(self, base: str) -> str:
        """What the merge or revert line adds in a team: the base branch is on the shared repository."""
        return f"; pushed {base} to the shared repository ([project] repo_url)" if self.repo_url else ""

    def _refuse_unsaved(self, ticket_id: str, run: dict[str, Any]) -> None:
        """Merging removes the ticket's worktree: refuse while it holds edits not committed on
        its branch (e.g. a conflict fixed but not committed), which would be lost."""
        wt = run.get("worktree")
        if not wt or not Path(wt).is_dir():
            return
        dirty = sorted(g.dirty_paths(Path(wt)))
        if dirty:
            raise TicketError(
                f"ticket {ticket_id}'s worktree {wt} has changes not committed on its branch "
                f"({', '.join(dirty[:10])}{' …' if len(dirty) > 10 else ''}): commit them there "
                f"(cd {wt} && git add -A && git commit), or drop them, then `middle merge {ticket_id}` "
                "again. Nothing was changed")

    def _finish_merge(self, ticket_id: str, run: dict[str, Any], merge_commit: str | None,
                      tip: str | None = None, *, premerge: str | None = None, why: str = "") -> None:
        """Record the merge: the base moved from `premerge` to `merge_commit`, and that step (not
        the branch's history, which may hold the base merged in) is the ticket's change."""
        fields: dict[str, Any] = {"merge_commit": merge_commit or "", "premerge_commit": premerge}
        if tip and tip != run.get("head_commit"):
            fields["head_commit"] = tip
        if premerge and merge_commit and premerge != merge_commit:
            fields["changes"] = g.numstat(Path(run["repo"]), premerge, merge_commit)
        self.store.set_run_fields(run["id"], **fields)
        self.store.set_status(ticket_id, "merged", f"merged into {run['base_branch']}"
                              + (f" at {merge_commit[:10]}" if merge_commit else " (no changes)") + why)
        self.worktrees.remove(run["repo"], ticket_id)

    # -- discarding and reverting ------------------------------------------------------------
    def discard(self, ticket_id: str, *, force: bool = False) -> ReviewResult:
        """Remove an unmerged ticket's worktree and branch and forget its memory doc. Files in
        its worktree that git does not track (none of the ticket's own: its run stages or
        commits what it writes) are the user's: refused unless `force`."""
        ticket = self.store.get_ticket(ticket_id)
        status = ticket.status.value
        if status == "running":
            raise TicketError(f"ticket {ticket_id!r} is running: {advise(self.store, ticket_id, 'discard')}")
        if status == "merged":
            raise TicketError(f"ticket {ticket_id!r} is merged: undo it with `middle revert {ticket_id}`")
        if status == "discarded":
            return ReviewResult(ticket_id, status, f"ticket {ticket_id} is already discarded")
        found = self.store.latest_run(ticket_id)
        run: dict[str, Any] | None = dict(found) if found is not None else None
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
            untracked = self._untracked(run)
            if untracked and not force:
                raise UntrackedFiles(
                    f"ticket {ticket_id}'s worktree {run['worktree']} holds files git does not track "
                    f"({', '.join(untracked[:10])}{' …' if len(untracked) > 10 else ''}), which discarding "
                    f"would delete: move out what you want to keep, or delete them with "
                    f"`middle discard {ticket_id} --force`. Nothing was changed", untracked)
            changed = bool(self._tip(run)) if run.get("repo") else False
            self.worktrees.remove(run["repo"], ticket_id)
            code = (f"removed its worktree and branch {run['branch']}" if changed
                    else "it changed no files; removed its worktree")
            if untracked:
                code += f" and {len(untracked)} untracked file(s) in it (--force)"
        removed, said = self.forget(ticket_id)
        self.store.set_status(ticket_id, "discarded", f"discarded; {said}")
        return ReviewResult(ticket_id, "discarded", f"discarded ticket {ticket_id}: {code}; {said}",
                            memory_docs_deleted=removed)

    @staticmethod
    def _untracked(run: dict[str, Any]) -> list[str]:
        wt = run.get("worktree")
        return g.untracked_paths(Path(wt)) if wt and Path(wt).is_dir() else []

    def revert(self, ticket_id: str, *, done: bool = False, force: bool = False) -> ReviewResult:
        """Undo a ticket: a merged one by a revert commit on the base branch (`done`: the user
        made the revert by hand), an unmerged one by discarding it; its memory doc is deleted.
        A revert that conflicts changes nothing and waits in a worktree of its own."""
        ticket = self.store.get_ticket(ticket_id)
        status = ticket.status.value
        found = self.store.latest_run(ticket_id)
        run: dict[str, Any] | None = dict(found) if found is not None else None
        if run is None:
            raise TicketError(f"ticket {ticket_id!r} has never run, so there is nothing to revert; "
                              f"{advise(self.store, ticket_id, 'revert')}")
        if status == "running":
            raise TicketError(f"ticket {ticket_id!r} is running: {advise(self.store, ticket_id, 'revert')}")
        # Ever indexed, not only now: a revert killed after deleting the docs (forget.marked) left
        # the ticket failed with none live, and the same revert must finish it, not refuse it.
        if status in ("failed", "interrupted") and not self.store.memory_docs(ticket_id, include_deleted=True):
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
            if done:
                raise TicketError(
                    f"ticket {ticket_id!r} is {status}, not merged: --done marks a merged ticket reverted "
                    f"once you have undone its merge yourself; `middle revert {ticket_id}` without it "
                    "discards an unmerged one")
            return self.discard(ticket_id, force=force)
        run = self._here(run)
        warnings = self._dependents(ticket_id, run["base_branch"])
        with self.worktrees.locked():  # one revert at a time, across processes: read again inside
            if self.store.get_ticket(ticket_id).status.value == "reverted":
                return ReviewResult(ticket_id, "reverted", f"ticket {ticket_id} is already reverted")
            latest = self.store.latest_run(ticket_id) or run
            undone = self._undo(ticket, {**run, "revert_commit": latest.get("revert_commit")},
                                done=done, force=force)
            if undone.commit:  # recorded at once: a revert run again (after a crash) finds it
                self.store.set_run_fields(run["id"], revert_commit=undone.commit)
        if undone.conflicts:
            return ReviewResult(ticket_id, "merged", undone.code, conflicts=undone.conflicts,
                                worktree=undone.worktree, warnings=warnings)
        removed, said = self.forget(ticket_id)
        self.store.set_status(ticket_id, "reverted", f"{undone.code}; {said}")
        return ReviewResult(ticket_id, "reverted", f"reverted ticket {ticket_id}: {undone.code}; {said}",
                            undone.commit, memory_docs_deleted=removed, warnings=warnings)

    def _undo(self, ticket: Any, run: dict[str, Any], *, done: bool, force: bool) -> undo.Undone:
        base = run["base_branch"]
        if not run.get("head_commit") or not run.get("merge_commit"):
            return undo.Undone(None, "it changed no files, so no code was reverted")
        before, after = self._merged_range(run)
        if before == after:
            return undo.Undone(None, f"its commits were already in {base} when it was marked merged, so "
                                     "merging it changed nothing there and no revert commit was made")
        change = undo.Merged(ticket.id, ticket.title, run["branch"], Path(run["repo"]), base, before, after,
                             reverted_by=run.get("revert_commit"))
        if done:
            return undo.confirm_undone(self.worktrees, change, force=force)
        undone = undo.revert(self.worktrees, change, publish=self.repo_url)
        if undone.commit and self.repo_url and not undone.conflicts:
            undone.code += self._pushed(base)
        return undone

    def _dependents(self, ticket_id: str, base: str) -> list[str]:
        """A warning per merged ticket whose `depends_on` names this one: its code stays."""
        return [f"ticket {d} is merged and depends on {ticket_id}: its code stays on {base} and may "
                f"need {ticket_id}'s; revert it too if so (`middle revert {d}`)"
                for d in dependents(self.store.list_tickets(status="merged"), ticket_id)]

    def forget(self, ticket_id: str) -> tuple[int, str]:
        """Delete the ticket's indexed docs from memory (exact strings), from whichever of the
        project's stores holds them (the backend may have changed in config since they were
        indexed); returns how many, and a line for the user saying from where."""
        ticket = self.store.get_ticket(ticket_id)
        docs = self.store.memory_docs(ticket_id)
        if not docs:
            # a revert or discard killed after marking them (forget.marked), run again: say so
            gone = len(self.store.memory_docs(ticket_id, include_deleted=True))
            return 0, "0 memory doc(s) deleted" + (f" (its {gone} were deleted already)" if gone else "")
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
        # Killed here, the docs are still the ticket's live ones: the same command deletes them
        # again (gone: it says so) and marks them.
        point("forget.deleted")
        self.store.mark_memory_docs_deleted(ticket_id)
        point("forget.marked")
        return removed, said
