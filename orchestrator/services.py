"""The one place that builds the services from a config: registry, memory, ticket store, coding agent, LLMs.

The runner, every CLI command, the demo, the memory CLI, `middle serve` and the benchmarks use it,
so a service is configured one way everywhere. Each part is built on first use (a read-only
command never starts a model client or creates a file) and `close()` closes what was built, in
reverse order: the memory facade first (its background summaries finish or are cancelled), then
the ticket store, then the offline fake API if one was started.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import ExitStack
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.config.settings import Config
from orchestrator.errors import CodingAgentError, CodingAgentMissing, CodingAgentUnreachable, ConfigError
from orchestrator.following import coding_agent_options, followed
from orchestrator.plugins.manager import PluginRegistry, registry
from orchestrator.plugins.memory_backend import TextLLM

if TYPE_CHECKING:  # the parts are imported when first built (a read-only command builds few)
    from orchestrator.coding_agent.base import CodingAgent
    from orchestrator.lifecycle.run_lifecycle import RunLifecycle
    from orchestrator.memory.facade import MemoryFacade
    from orchestrator.workspace import Review, Worktrees
    from tickets.store import TicketStore

log = logging.getLogger("middle.services")

MEMORY_FLUSH_TIMEOUT_S = 30.0  # how long close() waits for background summaries before cancelling


class LazyTextLLM:
    """The memory model tier, created on its first call: `middle memory search` needs no API key
    even when a memory model is configured, and only a summary that is really written does."""

    def __init__(self, factory: Any, model: str | None = None):
        self._factory = factory
        self.model = model  # backends key caches by it (e.g. hipporag's OpenIE cache)
        self._llm: TextLLM | None = None

    def complete(self, system: str, prompt: str, max_tokens: int = 1024) -> str:
        if self._llm is None:
            self._llm = self._factory()
        return self._llm.complete(system, prompt, max_tokens)


# Coding agents that speak the Messages API, so offline mode points them at the one fake the middle
# agent asks too (its record then holds both); any other kind starts its own fake (`offline`).
_SHARES_THE_FAKE = frozenset({"claude-code"})


def options_table(config: Config, kind: str | None) -> str:
    """Where the user sets coding agent `kind`'s options: `[coding_agent.options]` for the configured
    kind, `[coding_agents.<kind>]` for one a ticket picks (an agent that takes `table=` is told it, and
    its messages name it: orchestrator.coding_agent.base.OPTIONS_TABLE)."""
    return "[coding_agent.options]" if kind in (None, config.coding_agent.kind) else f"[coding_agents.{kind}]"


def ticket_agent_kind(ticket: Any) -> str | None:
    """The coding agent kind a ticket's `coding_agent:` front matter names, or None (the configured one)."""
    kind = (ticket.fields or {}).get("coding_agent")
    if kind is None or kind == "":
        return None
    if not isinstance(kind, str):
        raise ConfigError(f"ticket {ticket.id!r}: `coding_agent:` must be a coding agent's kind such as "
                          f"claude-code, not {kind!r}")
    return kind.strip()


class Services:
    """Everything a command needs for one config, built lazily and closed together.

    Overrides (for tests, the Python API and the server): `llm` (an AgentLLM or any LangChain
    BaseChatModel), `coding_agent`, `registry`, `memory_llm`, `coding_agent_env`. `fake=True` starts the
    built-in fake Messages API on 127.0.0.1 and points the middle agent and Claude Code at it
    (`responder` replaces its demo model, e.g. a ScriptedResponder).
    """

    def __init__(
        self,
        config: Config,
        *,
        llm: Any = None,
        coding_agent: Any = None,
        registry: PluginRegistry | None = None,
        memory_llm: TextLLM | None = None,
        coding_agent_env: dict[str, str] | None = None,
        fake: bool = False,
        responder: Any = None,
        remote: str | None = None,
    ):
        self.config = config
        self._llm, self._coding_agent, self._registry = llm, coding_agent, registry
        self._memory_llm, self._coding_agent_env = memory_llm, dict(coding_agent_env or {})
        self.fake, self._responder = fake, responder
        self.remote = remote  # `middle worker`: its clone's remote, fetched and pushed per ticket
        self._stack = ExitStack()
        self._built: list[str] = []
        # One coding agent per kind, built when a ticket first names it (`coding_agent:` front
        # matter); parallel tickets ask from their own threads.
        self._agents: dict[str, CodingAgent] = {}
        self._agents_lock = threading.Lock()
        self._local_noted = False  # first_to_note_local: said at the first start of turns only
        # Kinds built with a base URL not yet asked (ready_coding_agent): kind -> (its title, the URL)
        self._to_reach: dict[str, tuple[str, str]] = {}
        self._reach_lock = threading.Lock()

    def first_to_note_local(self) -> bool:
        """True the first time it is asked, False after: the local-model note (doctor.local_note_once)
        is said at the first start of turns these services serve, whichever command or run it is."""
        with self._agents_lock:
            first, self._local_noted = not self._local_noted, True
        return first

    # -- parts ----------------------------------------------------------------------------
    @cached_property
    def registry(self) -> PluginRegistry:
        return self._registry or registry()

    @cached_property
    def fake_api(self) -> Any:
        """The running fake Messages API (fake mode only), with `base_url`."""
        if not self.fake:
            raise ConfigError("the fake Messages API runs only in offline mode (--fake)")
        from orchestrator.fake_api import DemoResponder, FakeMessagesAPI

        api = FakeMessagesAPI(self._responder or DemoResponder())
        self._stack.enter_context(api)
        return api

    @cached_property
    def agent_llm(self) -> Any:
        """The middle agent's model: the override, else `[agent] provider`'s (agent.providers).
        Offline mode always asks the fake Messages API through the anthropic SDK."""
        if self._llm is not None:
            return self._llm
        cfg = self.config.agent
        if self.fake:
            from orchestrator.agent.llm import AnthropicLLM
            from orchestrator.config.offline import FAKE_API_KEY

            return AnthropicLLM(cfg.model, cfg.max_tokens, base_url=self.fake_api.base_url,
                                api_key=FAKE_API_KEY, max_retries=0)
        from orchestrator.agent.providers import build_agent_llm

        return build_agent_llm(cfg)

    @cached_property
    def memory_llm(self) -> TextLLM | None:
        """The cheaper memory tier (`[memory] llm_model`), or None: backends then work offline."""
        if self._memory_llm is not None:
            return self._memory_llm
        model = self.config.memory.llm_model
        if not model:
            return None

        def build() -> TextLLM:
            from orchestrator.agent.llm import AnthropicLLM, AnthropicTextLLM

            base = self.agent_llm
            if hasattr(base, "text_llm"):  # openai-compatible, claude-code: the same way to the model
                return base.text_llm(model)  # type: ignore[no-any-return]
            if not isinstance(base, AnthropicLLM):  # a LangChain agent model: a client of our own
                base = AnthropicLLM(self.config.agent.model, base_url=self.config.agent.base_url)
            return AnthropicTextLLM(model, base)

        return LazyTextLLM(build, model=model)

    @cached_property
    def memory(self) -> MemoryFacade | None:
        """The memory facade, or None when memory is off (then no memory call is ever made)."""
        cfg = self.config
        if not cfg.memory_enabled:
            if cfg.memory.backend != "none":  # still an error to name a bad backend or option
                self.registry.backend_options(cfg.memory.backend, cfg.memory.options)
            return None
        from orchestrator.memory.facade import MemoryFacade

        assert cfg.memory_dir is not None  # memory_enabled
        facade = MemoryFacade(
            cfg.memory_dir, cfg.memory.backend, cfg.memory.options, self.registry,
            llm=self.memory_llm, num_to_retrieve=cfg.memory.num_to_retrieve,
            url=cfg.memory_url, **cfg.memory_limits(),
        )
        # Pins and supersede links (memory.curation) live in the ticket store, read on each
        # recall; a command that has not created the store reads it read-only (or not at all).
        facade.state_source = self._memory_states
        self._built.append("memory")
        return facade

    def _memory_states(self, project_id: str) -> Any:
        store = self.read_store()  # the store when built, else read-only (or None: none yet)
        # the marks alone (pins, supersede links, expiry): not every imported doc's origin
        return store.memory_marks(project_id) if store is not None else {}

    def curator(self) -> Any:
        """The curation verbs (memory.curation.Curator) on the memory and the ticket store."""
        from orchestrator.memory.curation import Curator

        if self.memory is None:
            raise ConfigError("memory is off: set [memory] save_dir in middle.toml (or "
                              "MEMORY_SAVE_DIR) and a backend other than 'none'")
        return Curator(self.memory, self.store)

    @cached_property
    def store(self) -> TicketStore:
        """The ticket store, created if missing (commands that run or change tickets)."""
        from tickets.store import TicketStore

        store = TicketStore(self.config.store_target, reconnect_s=self.config.store.reconnect_s)
        self._built.append("store")
        return store

    def read_store(self) -> TicketStore | None:
        """The ticket store opened read-only, or None when no run has created it yet.

        Read-only commands (`tickets`, `log`, `memory list`) use this so they create no files.
        Opened once (kept under "read_only_store": a key of the method's own name would hide it).
        """
        if "store" in self.__dict__:
            return self.store
        if "read_only_store" not in self.__dict__:
            from tickets.store import open_read_only

            self.__dict__["read_only_store"] = open_read_only(self.config.store_target,
                                                              self.config.store.reconnect_s)
            if self.__dict__["read_only_store"] is not None:
                self._built.append("read_only_store")
        return self.__dict__["read_only_store"]

    @cached_property
    def coding_agent_env(self) -> dict[str, str]:
        """Variables merged over the environment for the configured coding agent's process (fake mode: the fake)."""
        return self.agent_env(self.config.coding_agent.kind)

    def agent_env(self, kind: str) -> dict[str, str]:
        """Variables merged over the environment for coding agent `kind`'s process: offline, the fake
        Messages API's (its own fake, if it has `offline`, and the variables of an agent following
        `[agent] provider` come in _build_coding_agent)."""
        env = dict(self._coding_agent_env)
        if self.fake:
            from orchestrator.config.offline import FAKE_API_KEY
            from orchestrator.fake_api.env import claude_code_env, offline_config_dir

            claude_config = offline_config_dir(self.config.resolve(self.config.state_dir) / "claude-config")
            env = {**claude_code_env(self.fake_api.base_url, str(claude_config),
                                     api_key=FAKE_API_KEY), **env}
        return env

    @property
    def coding_agent(self) -> CodingAgent:
        """The configured coding agent (`[coding_agent] kind`), its options validated by its own model."""
        return self.coding_agent_for(None)

    def coding_agent_for(self, kind: str | None) -> CodingAgent:
        """The coding agent of `kind` (a ticket's `coding_agent:`; None: `[coding_agent] kind`), one
        instance per kind. An unknown kind is a ConfigError listing the registered ones."""
        kind = kind or self.config.coding_agent.kind
        with self._agents_lock:
            if kind not in self._agents:
                if self._coding_agent is not None and kind == self.config.coding_agent.kind:
                    self._agents[kind] = self._coding_agent
                else:
                    self._agents[kind] = self._build_coding_agent(kind)
            return self._agents[kind]

    def coding_agents_built(self) -> list[CodingAgent]:
        """The coding agents built so far (each may have turns running: stop_all reaches them all)."""
        with self._agents_lock:
            return list(self._agents.values())

    def _build_coding_agent(self, kind: str) -> CodingAgent:
        cls = self.registry.coding_agent_class(kind)
        options = coding_agent_options(self.config, kind)
        env = self.coding_agent_env if kind == self.config.coding_agent.kind else self.agent_env(kind)
        offline = getattr(cls, "offline", None)
        if self.fake and kind not in _SHARES_THE_FAKE and offline is not None:
            # Another model API than the Messages API: the agent's own fake, answering from the same
            # responder (the demo model or a test's script), through its class's `offline`. A kind
            # without `offline` gets the Messages API fake's variables (as Claude Code does).
            workdir = self.config.resolve(self.config.state_dir) / "offline" / kind
            workdir.mkdir(parents=True, exist_ok=True)
            off = self._stack.enter_context(offline(self.fake_api.responder, workdir))
            options, env = {**options, **off.options}, {**off.env, **self._coding_agent_env}
        elif not self.fake:
            # The middle agent's provider, followed (Claude Code to Bedrock, aider to a local
            # server...), as `middle doctor` follows it: following.py owns the order.
            follows = followed(self.config, cls, kind, env)
            options, env = follows.options, follows.env
        where = options_table(self.config, kind)
        validated = self.registry.coding_agent_options(kind, options, where)
        from orchestrator.coding_agent.base import table_argument

        # The agent is told which table its options come from, so its messages (a CLI not found,
        # a turn past turn_timeout_s) name it: for a kind a ticket picks, `[coding_agents.<kind>]`.
        find_cli = getattr(cls, "find_cli", None)
        if find_cli is not None:
            try:  # a CLI that is not installed: said once, before a ticket is claimed
                find_cli(validated, **table_argument(find_cli, where))
            except CodingAgentError as exc:
                raise CodingAgentMissing(str(exc)) from None
        if not self.fake:  # the base URL the user gave, asked before its first turn (ready_coding_agent)
            from orchestrator.coding_agent.base import title_of
            from orchestrator.coding_agent.reachable import model_base_url

            url = model_base_url(cls, validated, {**os.environ, **env})
            if url:
                with self._reach_lock:
                    self._to_reach[kind] = (title_of(cls, kind), url)
        return cls(validated, env=env, **table_argument(cls, where))  # type: ignore[no-any-return]

    def ready_coding_agent(self, ticket: Any = None) -> CodingAgent:
        """The coding agent `ticket` runs on (None: the configured one), with the base URL the user
        gave it asked (a TCP connection, reachable.py) the first time a run is about to start a
        turn on it: before a ticket is claimed, so nothing answering there is one error
        (CodingAgentUnreachable) and no run, claim or worktree. Only there: a command that builds
        the agent and starts no turn (`middle run` with nothing to run) asks nothing. A server
        that answered is not asked again (one gone later is the turn's error); one that did not
        is asked again at the next ticket, and the batch says the same error once."""
        agent = self.coding_agent_of(ticket) if ticket is not None else self.coding_agent
        kind = (ticket_agent_kind(ticket) if ticket is not None else None) or self.config.coding_agent.kind
        with self._reach_lock:  # (parallel tickets: one probe per kind at a time)
            if kind not in self._to_reach:
                return agent
            title, url = self._to_reach[kind]
            from orchestrator.coding_agent.reachable import unreachable

            why = unreachable(url)
            if why:
                raise CodingAgentUnreachable(
                    f"nothing answers at {title}'s model API {url} ({why}): start that server, or correct "
                    f"the base URL {title} is given; no ticket was started")
            del self._to_reach[kind]
        return agent

    def coding_agent_of(self, ticket: Any) -> CodingAgent:
        """The coding agent a ticket runs on: its `coding_agent:` front matter, else the configured one."""
        kind = ticket_agent_kind(ticket)
        if kind is not None and kind not in self.registry.coding_agents:
            raise ConfigError(f"ticket {ticket.id!r} names `coding_agent: {kind}`, which no plugin registers: "
                              f"choose one of {', '.join(sorted(self.registry.coding_agents))} (`middle agents` "
                              "lists them), or install the plugin that provides it")
        return self.coding_agent_for(kind)

    @property
    def checkpoint_path(self) -> Path:
        return self.config.checkpoint_path

    @cached_property
    def worktrees(self) -> Worktrees | None:
        """Ticket worktrees under `<state_dir>/worktrees`, or None with `[project] isolation = "none"`."""
        if self.config.project.isolation == "none":
            return None
        from orchestrator.workspace import Worktrees

        return Worktrees(self.config.worktrees_path, self.config.project.base_branch, remote=self.remote,
                         push_url=self.config.project.repo_url)

    @cached_property
    def lifecycle(self) -> RunLifecycle:
        """The one owner of a run's end (status, run, claim, run_end event, hook)."""
        from orchestrator.lifecycle.run_lifecycle import RunLifecycle

        return RunLifecycle(self.store, self.registry.hook, self.config)

    @cached_property
    def review(self) -> Review:
        """diff / merge / discard / revert of tickets. The memory facade is built only when a doc
        is deleted: `middle diff` and `middle merge` open no memory store (and create none)."""
        from orchestrator.workspace import Review, Worktrees

        worktrees = self.worktrees or Worktrees(self.config.worktrees_path, self.config.project.base_branch)
        cfg = self.config
        return Review(self.store, worktrees, memory=lambda: self.memory,
                      local_project=cfg.resolve(cfg.project.path), repo_url=cfg.project.repo_url)

    # -- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        """Close what was built: memory first (background work finishes), then stores, then the fake."""
        if "memory" in self._built and self.memory is not None:
            try:
                self.memory.flush(MEMORY_FLUSH_TIMEOUT_S)
            except Exception:  # closing must not mask the command's own outcome
                log.exception("waiting for background memory work failed")
            self.memory.close()
        for name in ("store", "read_only_store"):
            if name in self._built and self.__dict__.get(name) is not None:
                self.__dict__[name].close()
        self._built.clear()
        self._stack.close()

    def __enter__(self) -> "Services":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

