"""`middle doctor`: which coding agent and which model a run will use, and whether each can be used.

Each check is a Check row (what is used, where, and a status); a problem carries one line saying
what to do. Nothing here starts a ticket or writes a file; without `offline` the model gets one
tiny call (a few tokens) so a wrong key or an unreachable server shows here, not in a run.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from orchestrator.config.settings import Config
from orchestrator.errors import MiddleError

VERSION_TIMEOUT_S = 30.0


@dataclass
class Check:
    part: str  # "coding agent" or "middle agent"
    uses: str  # the kind / provider and model
    where: str  # the executable or endpoint
    status: str  # what was found, in a few words
    problem: str | None = None  # one line saying what to do; None: usable

    @property
    def ok(self) -> bool:
        return self.problem is None


def diagnose(config: Config, *, offline: bool = False, registry: Any = None) -> list[Check]:
    """The coding agent's check, then the middle agent's model's."""
    return [coding_agent_check(config, registry), model_check(config, offline=offline)]


def coding_agent_check(config: Config, registry: Any = None) -> Check:
    from orchestrator.plugins.manager import registry as default_registry

    kind = config.coding_agent.kind
    try:
        reg = registry or default_registry()
        cls = reg.coding_agent_class(kind)
        options = reg.coding_agent_options(kind, config.coding_agent.options)
    except MiddleError as exc:
        return Check("coding agent", kind, "-", "not usable", str(exc))
    if kind != "claude-code":
        # A plugin's agent may say how it is reached: `doctor(options) -> (where, problem or None)`.
        probe = getattr(cls, "doctor", None)
        if probe is None:
            return Check("coding agent", kind, "-", "registered (no check for this kind)")
        where, problem = probe(options)
        return Check("coding agent", kind, where, "not usable" if problem else "ok", problem)
    from orchestrator.claude_cli import find_claude_cli
    from orchestrator.errors import CodingAgentError

    try:
        cli = find_claude_cli(getattr(options, "cli_path", None))
    except CodingAgentError as exc:
        return Check("coding agent", kind, "-", "not installed", str(exc))
    version, problem = cli_version(cli)
    return Check("coding agent", kind, cli, version or "does not run", problem)


def cli_version(cli: str) -> tuple[str | None, str | None]:
    """`<cli> --version`'s first line, or a problem line."""
    try:
        done = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
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
        return Check("middle agent", uses, _configured_where(cfg), "not usable", str(exc))
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
