"""`middle doctor`: which coding agent and which model a run will use, and whether each can be used.

Each check is a Check row (what is used, where, and a status); a problem carries one line saying
what to do. Nothing here starts a ticket or writes a file; without `offline` the model gets one
tiny call (a few tokens) so a wrong key or an unreachable server shows here, not in a run.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from orchestrator.config.settings import Config
from orchestrator.errors import MiddleError, ModelAccessError

VERSION_TIMEOUT_S = 30.0


@dataclass
class Check:
    part: str  # "coding agent" or "middle agent"
    uses: str  # the kind / provider and model
    where: str  # the executable or endpoint
    status: str  # what was found, in a few words
    problem: str | None = None  # one line saying what to do; None: usable
    # the problem stops only what --offline did not check (the model's credentials are missing:
    # `middle run --fake` works, `middle run` does not), so it is said as a warning
    warning: bool = False

    @property
    def ok(self) -> bool:
        return self.problem is None or self.warning


def diagnose(config: Config, *, offline: bool = False, registry: Any = None) -> list[Check]:
    """A check per coding agent a run will use (the configured kind, then each other kind a ticket
    names in its `coding_agent:`), then the middle agent's model's."""
    kinds = [config.coding_agent.kind] + [k for k in ticket_kinds(config) if k != config.coding_agent.kind]
    return ([coding_agent_check(config, registry, kind, offline=offline) for kind in kinds]
            + [model_check(config, offline=offline)])


def ticket_kinds(config: Config) -> list[str]:
    """The coding agent kinds the ticket folder's tickets name (sorted; a broken file names none:
    `middle tickets` reports it)."""
    from orchestrator.services import ticket_agent_kind
    from tickets.source import load_tickets

    try:
        loaded = load_tickets(config.resolve(config.project.tickets_dir), config.resolve(config.project.path))
    except (MiddleError, OSError):
        return []
    kinds: set[str] = set()
    for ticket in loaded.tickets:
        try:
            kind = ticket_agent_kind(ticket)
        except MiddleError:
            continue
        if kind:
            kinds.add(kind)
    return sorted(kinds)


def coding_agent_check(config: Config, registry: Any = None, kind: str | None = None, *,
                       offline: bool = False) -> Check:
    from orchestrator.following import coding_agent_options
    from orchestrator.plugins.manager import registry as default_registry

    kind = kind or config.coding_agent.kind
    try:
        reg = registry or default_registry()
        cls = reg.coding_agent_class(kind)
        options = reg.coding_agent_options(kind, coding_agent_options(config, kind))
    except MiddleError as exc:
        return Check("coding agent", kind, "-", "not usable", str(exc))
    uses = kind + _following(cls, config, kind)
    try:
        priced = agent_pricing(config, reg, kind)
    except MiddleError:  # (options valid alone, not with [agent] provider's defaults: a run says so)
        priced = None
    if priced is not None:
        uses += f" ({priced})"
    # A plugin's agent may say how it is reached: `doctor(options) -> (where, problem or None)`;
    # else `find_cli(options)` and the CLI's --version (the built-in agents).
    probe = getattr(cls, "doctor", None)
    if probe is not None:
        where, problem = probe(options)
        status = "not usable" if problem else "ok"
    else:
        find_cli = getattr(cls, "find_cli", None)
        if find_cli is None:
            return Check("coding agent", uses, "-", "registered (no check for this kind)")
        from orchestrator.coding_agent.base import table_argument
        from orchestrator.errors import CodingAgentError
        from orchestrator.services import options_table

        try:  # (its message names the table this kind's options are set in)
            where = find_cli(options, **table_argument(find_cli, options_table(config, kind)))
        except CodingAgentError as exc:
            return Check("coding agent", uses, "-", "not installed", str(exc))
        version, problem = cli_version(where)
        status = version or "does not run"
    if problem is None and not offline:  # a base URL the user gave with nothing behind it, as a run says it
        url_problem = _unreachable(config, reg, kind)
        if url_problem:
            return Check("coding agent", uses, where, "model API unreachable", url_problem)
    return Check("coding agent", uses, where, status, problem)


def _unreachable(config: Config, registry: Any, kind: str) -> str | None:
    """What to do when nothing answers at the base URL a run would give coding agent `kind`, as
    `middle run` follows `[agent] provider` to it (services.ready_coding_agent asks the same)."""
    from orchestrator.coding_agent.reachable import model_base_url, unreachable

    try:
        url = model_base_url(registry.coding_agent_class(kind), *_followed(config, registry, kind))
    except MiddleError:  # (options valid alone, not with [agent] provider's defaults: a run says so)
        return None
    why = unreachable(url) if url else None
    return f"nothing answers at {url} ({why}): start that server, or correct the base URL" if why else None


def _followed(config: Config, registry: Any, kind: str,
              env: dict[str, str] | None = None) -> tuple[Any, dict[str, str]]:
    """Coding agent `kind`'s validated options and whole environment with `[agent] provider`
    followed, by the function a run builds the agent with (following.py); `env`: the variables a
    run's services give the agent (Services' coding_agent_env; none from the CLI)."""
    from orchestrator.following import followed

    follows = followed(config, registry.coding_agent_class(kind), kind, env)
    return registry.coding_agent_options(kind, follows.options), follows.environ()


def agent_pricing(config: Config, registry: Any, kind: str, env: dict[str, str] | None = None) -> str | None:
    """What coding agent `kind`'s turns count at, as its class says (`pricing(options[, environ])`:
    an agent whose CLI reports tokens, not money), with `[agent] provider` followed as a run
    follows it (a local server's base URL is what makes its turns free); None: it does not say."""
    import inspect

    cls = registry.coding_agent_class(kind)
    pricing = getattr(cls, "pricing", None)
    if pricing is None:
        return None
    options, environ = _followed(config, registry, kind, env)
    try:
        takes_environ = "environ" in inspect.signature(pricing).parameters
    except (TypeError, ValueError):  # (no signature to read)
        takes_environ = False
    return str(pricing(options, environ=environ) if takes_environ else pricing(options))


def local_model_note(config: Config, registry: Any = None, env: dict[str, str] | None = None) -> str | None:
    """The line `middle run` starts with when the configured coding agent's model is served from a
    local address: priced as any unknown model for max_cost_usd, which a free one can be told not to
    be (pricing.py); None otherwise. `env`: the variables the run gives the agent (Services')."""
    from orchestrator.coding_agent.pricing import local_pricing
    from orchestrator.plugins.manager import registry as default_registry

    kind = config.coding_agent.kind
    try:
        priced = agent_pricing(config, registry or default_registry(), kind, env)
    except MiddleError:
        return None  # (`middle run` says what is wrong with the options when it builds the agent)
    return f"{kind}: {priced}" if priced and local_pricing(priced) else None


def local_note_once(services: Any) -> str | None:
    """local_model_note for the services' config the first time any start of turns asks, None
    after: `middle run`, `resume`, `feedback` and `worker` ask as they open, any run through
    TicketDriver (the server's, the Python API's) as it starts, so it is said once per process
    whichever starts first. None offline: the fake costs nothing."""
    if not services.first_to_note_local() or services.fake:
        return None
    # (with the variables the services give the agent: the note prices what the run will call)
    return local_model_note(services.config, services.registry, services.coding_agent_env)


def _following(cls: Any, config: Config, kind: str) -> str:
    """" (following [agent] provider X)" when the agent takes its way to the model from [agent]."""
    from orchestrator.following import followed

    return f" (following [agent] provider {config.agent.provider})" if followed(config, cls, kind).following else ""


def cli_version(cli: str) -> tuple[str | None, str | None]:
    """`<cli> --version`'s first line, or a problem line."""
    # Even `gemini --version` registers the directory in its home's projects.json and leaves two
    # empty projects.json.*.tmp files in ~/.gemini on every call: the probe gets a home of its own.
    with tempfile.TemporaryDirectory(prefix="middle-doctor-") as home:
        try:
            done = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL, env={**os.environ, "GEMINI_CLI_HOME": home})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"{cli} --version failed ({exc}): reinstall it or fix its path"
    line = (done.stdout or done.stderr).strip().splitlines()[:1]
    if done.returncode != 0 or not line:
        return None, f"{cli} --version exited {done.returncode}: reinstall it or fix its path"
    return line[0], None


def model_check(config: Config, *, offline: bool = False) -> Check:
    from orchestrator.agent.providers import build_agent_llm

    cfg = config.agent
    uses = f"{cfg.provider}: {cfg.model}"
    try:
        llm = build_agent_llm(cfg, max_retries=0)  # credentials looked for here
    except MiddleError as exc:
        # --offline: what does not need the model passes; its missing credentials are a warning
        # (the hint names `middle run --fake`, which needs none), not a failure of the doctor.
        # (Anthropic's missing key is a ConfigError, the other providers' a ModelAccessError.)
        missing = isinstance(exc, ModelAccessError) or (
            cfg.provider == "anthropic" and not os.environ.get("ANTHROPIC_API_KEY"))
        warning = offline and missing
        return Check("middle agent", uses, _configured_where(cfg), "no credentials" if warning else "not usable",
                     str(exc), warning=warning)
    where = llm.where()
    if offline:
        return Check("middle agent", uses, where, "credentials found (not called: --offline)")
    started = time.monotonic()
    try:
        llm.ping()
    except MiddleError as exc:
        return Check("middle agent", uses, where, "no answer", str(exc))
    return Check("middle agent", uses, where, f"answered ({time.monotonic() - started:.1f} s)")


def _configured_where(cfg: Any) -> str:
    if cfg.base_url:
        return str(cfg.base_url)
    if cfg.provider == "anthropic":
        return os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
    return "-"
