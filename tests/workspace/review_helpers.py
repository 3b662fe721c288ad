"""Helpers for the review tests: a memory that records deletes, a ticket completed on its branch
(what the graph does, without a model), and a snapshot of everything a user could notice."""

from __future__ import annotations

from pathlib import Path

from orchestrator.testing.git import snapshot  # noqa: F401  (the review tests' import)
from tickets.model import Ticket


class Memory:
    """The part of the memory facade review uses, recording deletes."""

    def __init__(self):
        self.deleted: list[tuple[str, list[str]]] = []

    def delete(self, project, docs):
        self.deleted.append((project, list(docs)))
        return len(docs)


def complete(store, wt, repo, tid, files, *, doc=None, depends_on=(), status="complete"):
    """A ticket whose run wrote `files` in its worktree and completed (what the graph does);
    `status="failed"`: its check still failed after its rounds, its work committed (kept)."""
    store.upsert_ticket(Ticket(id=tid, project_id="p", title=f"Ticket {tid}", project_path=str(repo),
                               depends_on=list(depends_on)))
    run_id = store.claim_new_run(tid, ["pending", "discarded"])
    assert run_id is not None
    ws = wt.prepare(tid, repo)
    store.set_run_fields(run_id, isolation="worktree", repo=ws.repo, base_branch=ws.base_branch,
                         base_commit=ws.base_commit, branch=ws.branch, worktree=ws.path)
    for rel, text in files.items():
        (Path(ws.path) / rel).write_text(text)
    sha, changes = wt.commit(ws, f"Ticket {tid}\n\ndone\n")
    store.set_run_fields(run_id, head_commit=sha, changes=changes)
    if doc:
        store.add_memory_doc(tid, "p", doc)
    if status == "failed":
        assert store.end_run(tid, run_id, "failed", "the check still fails", event={"check_failed": True,
                                                                                     "kept_work": True})
    else:
        assert store.end_run(tid, run_id, "complete", None)
    return sha
