"""The Python API: build everything from a Config and run, resume or revert tickets."""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from langgraph.checkpoint.sqlite import SqliteSaver

from orchestrator.agent.llm import AnthropicLLM, AnthropicTextLLM
from orchestrator.agent.middle_agent import MiddleAgent
from orchestrator.config import Config
from orchestrator.errors import MiddleError, TicketError
from orchestrator.graph import Limits, TicketContext, build_graph
from orchestrator.memory import MemoryFacade
from orchestrator.plugin_api import TextLLM
from orchestrator.plugins import PluginRegistry, call_hook
from orchestrator.worker.base import EventCallback, Worker
from tickets.source import LoadResult, load_tickets
from tickets.store import TicketStore

log = logging.getLogger("middle.runner")


@dataclass
class RunOutcome:
    ticket_id: str
    run_id: str
    status: str  # complete | failed | interrupted
    reason: str = ""
    turns: int = 0
    cost_usd: float = 0.0
    resumable: bool = False


class Orchestrator:
    """Owns the ticket store, memory, middle agent, worker and checkpointer for one config.

    `llm` may be an AgentLLM or any LangChain BaseChatModel; by default Claude through the
    anthropic SDK. `worker` defaults to the configured kind (Claude Code).
    """

    def __init__(
        self,
        config: Config,
        *,
        llm: Any = None,
        worker: Worker | None = None,
        registry: PluginRegistry | None = None,
        memory_llm: TextLLM | None = None,
        worker_env: dict[str, str] | None = None,
        say: Callable[[str], None] | None = None,
        on_event: EventCallback | None = None,
    ):
        self.config = config
        self.registry = registry or PluginRegistry()
        if config.memory.backend != "none" and not config.memory_enabled:
            # The facade validates when memory is on; when off, a bad name or option is still an error.
            self.registry.backend_options(config.memory.backend, config.memory.options)
        self.store = TicketStore(config.db_path)
        agent_llm = llm if llm is not None else AnthropicLLM(
            config.agent.model, config.agent.max_tokens, base_url=config.agent.base_url
        )
        if memory_llm is None and config.memory.llm_model and config.memory_enabled:
            base = agent_llm if isinstance(agent_llm, AnthropicLLM) else AnthropicLLM(config.agent.model)
            memory_llm = AnthropicTextLLM(config.memory.llm_model, base)
        self.memory = (
            MemoryFacade(config.memory_dir, config.memory.backend, config.memory.options,
                         self.registry, llm=memory_llm, num_to_retrieve=config.memory.num_to_retrieve)
            if config.memory_enabled else None
        )
        self.agent = MiddleAgent(agent_llm, config.agent.max_turns)
        self.worker = worker or self._make_worker(worker_env)
        self.say = say or (lambda msg: log.info(msg))
        self.on_event = on_event
        config.checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(config.checkpoint_path), check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self.graph = build_graph().compile(checkpointer=SqliteSaver(self._conn))

    def _make_worker(self, env: dict[str, str] | None) -> Worker:
        """The configured worker kind, given the `[worker]` settings its Options model declares."""
        cls = self.registry.worker_class(self.config.worker.kind)
        settings = self.config.worker.model_dump(exclude={"kind"})
        fields = cls.Options.model_fields
        return cls(cls.Options(**{k: v for k, v in settings.items() if k in fields}), env=env)

    # -- tickets ---------------------------------------------------------------------------
    def sync_tickets(self, folder: str | Path | None = None) -> LoadResult:
        """Load the Markdown ticket folder into the store (new tickets pending; others updated)."""
        folder = self.config.resolve(folder or self.config.project.tickets_dir)
        result = load_tickets(folder, self.config.resolve(self.config.project.path))
        for ticket in result.tickets:
            self.store.upsert_ticket(ticket)
        return result

    def _context(self) -> TicketContext:
        return TicketContext(
            store=self.store, agent=self.agent, worker=self.worker, memory=self.memory,
            limits=Limits(self.config.agent.max_turns, self.config.agent.max_cost_usd),
            num_to_retrieve=self.config.memory.num_to_retrieve, hooks=self.registry.hook,
            on_event=self.on_event, say=self.say,
        )

    def run_ticket(self, ticket_id: str) -> RunOutcome:
        """Start a new run of a ticket (pending, failed or reverted; a running one is refused)."""
        ticket = self.store.get_ticket(ticket_id)
        if ticket.status == "running":
            raise TicketError(
                f"ticket {ticket_id!r} is marked running: if no other `middle` process is "
                f"working on it, continue it with `middle resume {ticket_id}`"
            )
        run_id = self.store.create_run(ticket_id)
        return self._drive(ticket_id, run_id, {"ticket_id": ticket_id, "run_id": run_id})

    def resume(self, ticket_id: str) -> RunOutcome:
        """Continue the ticket's latest run from its last checkpoint (a completed turn never re-runs)."""
        run = self.store.latest_run(ticket_id)
        if run is None:
            self.store.get_ticket(ticket_id)  # a clear error for an unknown id
            raise TicketError(f"ticket {ticket_id!r} has never run: start it with `middle run {ticket_id}`")
        snapshot = self.graph.get_state({"configurable": {"thread_id": run["id"]}})
        if not snapshot.next:
            raise TicketError(
                f"the last run of ticket {ticket_id!r} already ended ({run['status']}): "
                f"start a new one with `middle run {ticket_id}`"
            )
        self.store.finish_run(run["id"], "running")
        self.store.set_status(ticket_id, "running")
        return self._drive(ticket_id, run["id"], None)

    def _drive(self, ticket_id: str, run_id: str, graph_input: dict[str, Any] | None) -> RunOutcome:
        cfg = {"configurable": {"thread_id": run_id}}
        try:
            for update in self.graph.stream(
                graph_input, cfg, context=self._context(), stream_mode="updates", durability="sync"
            ):
                log.debug("graph step %s", list(update))
        except MiddleError as exc:
            # The checkpoint stays before the failed node, so `middle resume` retries from there.
            reason = str(exc)
            self.store.set_status(ticket_id, "failed", reason)
            self.store.finish_run(run_id, "failed", reason)
            call_hook(self.registry.hook, "on_ticket_failed", ticket=self.store.get_ticket(ticket_id),
                      run_id=run_id, reason=reason)
            return RunOutcome(ticket_id, run_id, "failed", reason, self._turns(run_id),
                              self.store.total_cost(run_id), resumable=True)
        except KeyboardInterrupt:
            self.store.finish_run(run_id, "interrupted", "interrupted by the user")
            self.store.set_status(ticket_id, "failed", f"interrupted: continue with `middle resume {ticket_id}`")
            raise
        state = self.graph.get_state(cfg).values
        return RunOutcome(ticket_id, run_id, state.get("status", "failed"), state.get("reason", ""),
                          state.get("turn", 0), self.store.total_cost(run_id))

    def _turns(self, run_id: str) -> int:
        return len(self.store.list_turns(run_id=run_id))

    def revert(self, ticket_id: str) -> int:
        return revert_ticket(self.store, self.memory, ticket_id)

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
        self._conn.close()

    def __enter__(self) -> "Orchestrator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def revert_ticket(store: TicketStore, memory: MemoryFacade | None, ticket_id: str) -> int:
    """Delete the ticket's indexed docs from memory (exact strings) and mark it reverted."""
    ticket = store.get_ticket(ticket_id)
    docs = store.memory_docs(ticket_id)
    removed = 0
    if docs:
        if memory is None:
            raise TicketError(
                f"ticket {ticket_id!r} has {len(docs)} indexed memory doc(s) but memory is off: "
                "set [memory] save_dir (or MEMORY_SAVE_DIR) to the store they were indexed in"
            )
        removed = memory.delete(ticket.project_id, docs)
        store.mark_memory_docs_deleted(ticket_id)
    store.set_status(ticket_id, "reverted", f"reverted; {removed} memory doc(s) deleted")
    return removed
