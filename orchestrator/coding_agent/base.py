"""The coding-agent protocol: what the ticket graph needs from a coding agent, one turn at a time."""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Protocol


@dataclass
class TurnResult:
    """The outcome of one coding-agent turn (for Claude Code: the final `result` line)."""

    session_id: str | None
    text: str
    is_error: bool = False
    error: str | None = None  # a sentence saying what went wrong, when is_error
    cost_usd: float = 0.0
    usage: dict[str, Any] = field(default_factory=dict)
    num_turns: int = 0
    duration_ms: int = 0
    exit_code: int | None = 0
    terminal_reason: str | None = None
    api_error_status: int | None = None  # the model API's HTTP status when it failed the turn
    # Tool calls refused for lack of permission, e.g. a write outside the project: {"tool", "target"}
    permission_denials: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Offline:
    """A coding agent pointed at a local fake of its model API, from its class's optional
    `offline(responder, workdir)` context manager (the offline demo, the contract kit's harness for
    built-ins and their end-to-end tests all use it, so each agent has one owner of this wiring).

    `options`: `[coding_agent.options]` overrides (e.g. a config file the CLI must read);
    `env`: variables merged over os.environ for the agent's process, pointing it only at the fake
    (its base URL, a fake key, config/home dirs under `workdir`, no telemetry or updates);
    `requests`: the canonical (Anthropic-shaped) bodies the fake received on the "coding_agent"
    channel, oldest first.
    """

    options: dict[str, Any]
    env: dict[str, str]
    requests: Callable[[], list[dict[str, Any]]]


# The options table a coding agent's messages name by default: the configured kind's. An agent that
# takes `table=` (its constructor and its `find_cli`) is told the table its options come from
# (`[coding_agents.<kind>]` for a kind a ticket picks) and names that one where each message is made.
OPTIONS_TABLE = "[coding_agent.options]"


def table_argument(function: Any, table: str) -> dict[str, str]:
    """`{"table": table}` for a constructor or `find_cli` that takes it, else nothing (a plugin's
    agent written before it: its messages name the table they name)."""
    try:
        return {"table": table} if "table" in inspect.signature(function).parameters else {}
    except (TypeError, ValueError):  # (no signature to read)
        return {}


# Called with each parsed progress event ({"type": ..., ...}) so the CLI can stream progress.
EventCallback = Callable[[dict[str, Any]], None]


class CodingAgent(Protocol):
    """A coding agent driven one prompt at a time in the ticket's project directory."""

    kind: ClassVar[str]
    Options: ClassVar[type]  # a strict pydantic model; it validates the `[coding_agent.options]` table

    # Optional (not part of the protocol's required surface, so not declared here):
    # - `offline(cls, responder, workdir: Path) -> ContextManager[Offline]`, a classmethod starting
    #   the agent's fake API answering from `responder` (a fake_api ScriptedResponder or
    #   DemoResponder); see Offline. `middle demo --agent KIND` and `--fake` runs need it.
    # - `find_cli(cls, options=None) -> str`, a classmethod: the path of the CLI those options run,
    #   or CodingAgentError whose message holds the install command (`middle agents` shows it).
    # - a keyword `table` (OPTIONS_TABLE by default) of `__init__` and `find_cli`: the options table
    #   its messages name (middle passes it to an agent whose signature has it).
    # - `stop_all(self, why) -> int`: kill every running turn; each of those run_turn calls then
    #   raises RunInterrupted (Ctrl-C or SIGTERM of a batch).
    # - `follow_provider(cls, options: dict, agent, environ) -> (options, env)`, a classmethod: the
    #   option defaults and environment that make the agent reach its model the way the middle
    #   agent's `[agent]` (`agent`) says, so one config line serves both (Claude Code on Bedrock or
    #   Vertex; aider and OpenCode on an openai-compatible server). The user's options win over
    #   the defaults it returns; its variables go over os.environ (which `environ` holds: it yields
    #   to what the user chose there) and under those given for the agent alone (orchestrator/
    #   following.py, the one place both `middle run` and `middle doctor` apply it); it returns
    #   ({}, {}) when it does not apply.
    # - `model_base_url(cls, options, environ) -> str | None`, a classmethod: the model API address
    #   the user gave the agent (None: its own default service); middle asks it with a TCP
    #   connection before a run claims its first ticket on the agent and says once when nothing
    #   answers (reachable.py, Services.ready_coding_agent).

    def run_turn(
        self,
        prompt: str,
        cwd: Path,
        *,
        session_id: str | None,
        resume: bool,
        on_event: EventCallback | None = None,
    ) -> TurnResult:
        """Run one turn. `session_id` is chosen by the caller and stored before launch;
        `resume` says whether it names an existing session (turn 2 on) or a new one to create.
        Must not raise for a failed turn: return TurnResult(is_error=True, error=...).
        Raises CodingAgentError only when the coding agent cannot start at all (e.g. not installed)."""


def title_of(agent: Any, kind: str | None = None) -> str:
    """How messages name a coding agent: its class's `title` ("Claude Code", "Codex"), else its
    kind, else "the coding agent"."""
    return str(getattr(agent, "title", None) or getattr(agent, "kind", None) or kind or "the coding agent")
