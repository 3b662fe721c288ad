"""The Python API: run, resume, review or revert tickets with the services built from a Config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.running.driver import TicketDriver
from orchestrator.running.sync import sync
from tickets.source import LoadResult

__all__ = ["Orchestrator"]


class Orchestrator(TicketDriver):
    """The ticket driver (`run_ticket`, `resume`; see orchestrator.running.driver) with the
    backlog's other verbs: sync the ticket source, run many, diff, merge, discard, revert.

    Pass `services` to share them (the CLI and the server do), or the same overrides `Services`
    takes (`llm` = an AgentLLM or any LangChain BaseChatModel, `coding_agent`, `registry`,
    `memory_llm`, `coding_agent_env`, `fake`). Use as a context manager; it closes what it built.
    """

    # -- tickets ---------------------------------------------------------------------------
    def sync_tickets(self, folder: str | Path | None = None, *, source: str | None = None) -> LoadResult:
        """Load the ticket source ([tickets], or a Markdown `folder`, or `source` = KIND:ARG) into
        the store (new tickets pending; others updated); see orchestrator.running.sync."""
        return sync(self.store, self.config, source=source, folder=folder, registry=self.registry)

    def run_many(self, ticket_ids: list[str], *, parallel: int | None = None, rerun: bool = False) -> Any:
        """Run tickets N at once (default `[run] parallel`), dependencies first; a BatchResult."""
        from orchestrator.running.batch import run_batch

        return run_batch(self, ticket_ids, parallel=parallel, rerun=rerun)

    def diff(self, ticket_id: str) -> dict[str, Any]:
        """The ticket's change against the commit it started from (files and the patch text)."""
        return self.services.review.diff(ticket_id)

    def merge(self, ticket_id: str, *, despite_check: str | None = None, by: str = "") -> Any:
        """Merge a complete ticket's branch into the base branch (a ReviewResult; on a conflict
        nothing changed and its status is "conflict"); with `despite_check`, a ticket that failed
        on its check, the person's reason recorded (ReviewService.merge)."""
        return self.services.review.merge(ticket_id, despite_check=despite_check, by=by)

    def discard(self, ticket_id: str, *, force: bool = False) -> Any:
        """Remove an unmerged ticket's worktree, branch and memory doc (refused while its worktree
        holds files git does not track, unless `force`)."""
        return self.services.review.discard(ticket_id, force=force)

    def revert(self, ticket_id: str, *, done: bool = False, force: bool = False) -> Any:
        """Undo a ticket: a revert commit for a merged one, else discard; its memory doc deleted.
        On a conflict nothing changed: `conflicts` and `worktree` say where to resolve it.
        `done`: the user undid the merge by hand (checked unless `force`)."""
        return self.services.review.revert(ticket_id, done=done, force=force)

    def __enter__(self) -> "Orchestrator":
        return self
