"""The OpenCode coding agent (kind "opencode"): one `opencode run --format json` process per turn.

Facts about OpenCode 1.18.33 this relies on (observed against the fake Chat Completions API):
- `opencode run --format json` reads the prompt from stdin when it is not a terminal and prints
  one JSON event a line (see opencode_events.py); it exits 0 after its answer, 1 on an error
  (an `error` event, or "Error: Session not found" on stderr for an unknown --session).
- Its working directory is `--dir`, but it also trusts $PWD over the real cwd: both are set.
- It makes its own session ids (ses_...): `--session ID` continues one; `--title T` names a new
  one (and spares the title-generating model call).
- OPENCODE_CONFIG_CONTENT is a config merged over the user's (opencode.json) and the project's:
  the permission rules here come through it. A rule list is matched last-first, so "*" comes first.
  `external_directory: deny` refuses any tool call on a path outside the project (read or write).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, ContextManager

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from ..errors import CodingAgentError
from ..executables import find_executable
from .api_errors import CONNECT, advice, kind_of, status_of
from .base import OPTIONS_TABLE, EventCallback, Offline, TurnResult
from .opencode_events import OpenCodeStream
from .pricing import ANY_PRICES, TokenPrice, counted_cost, price_for, reported_or_priced
from .process import LogWatch, ProcessOutcome, TurnProcesses, safe_callback, tail
from .turn_tmp import turn_tmpdir

__all__ = ["INSTALL", "OpenCodeAgent", "OpenCodeOptions"]

VERSION = "1.18.33"  # the version this module was written and tested against
INSTALL = f"npm install -g opencode-ai@{VERSION}"
TITLE_PREFIX = "middle:"  # a session's title: TITLE_PREFIX + our session id (how a resume finds it)
_LOOKUP_TIMEOUT_S = 60.0
_PERMISSIONS = ("allow", "ask", "deny")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_UNREACHABLE = "Cannot connect to API"  # its log's words for a base URL nothing answers at
_NO_MODEL = re.compile(r'ProviderModelNotFoundError: Model not found: [^\s"]+')
# `opencode run` answers an "ask" permission itself (nobody is there), then ends the turn.
_ASKED = re.compile(r"permission requested: (.+?); auto-rejecting")


def opencode_base_url(model: str | None, environ: Mapping[str, str]) -> str | None:
    """The baseURL of `model`'s provider ("<provider>/<model>") as OpenCode's config declares it:
    the inline config (OPENCODE_CONFIG_CONTENT, where `follow_provider` declares [agent]'s server),
    else the file OPENCODE_CONFIG names, else the global opencode.json(c) (under XDG_CONFIG_HOME, or
    ~/.config). A local one prices turns at 0 (pricing.py). A project's own opencode.json and a
    file with comments are not read: set `price` for those."""
    if not model or "/" not in model:
        return None
    provider = model.split("/", 1)[0]
    configs: list[str] = [environ.get("OPENCODE_CONFIG_CONTENT") or ""]
    home = environ.get("XDG_CONFIG_HOME") or (str(Path(environ["HOME"]) / ".config") if environ.get("HOME") else "")
    files = [environ.get("OPENCODE_CONFIG") or ""] + [
        str(Path(home) / "opencode" / name) for name in ("opencode.jsonc", "opencode.json", "config.json") if home]
    for name in files:
        try:
            configs.append(Path(name).read_text(encoding="utf-8") if name else "")
        except (OSError, UnicodeDecodeError):
            continue
    for text in configs:
        found = _declared_base_url(text, provider)
        if found:
            return found
    return None


def _declared_base_url(text: str, provider: str) -> str | None:
    try:
        content = json.loads(text) if text.strip() else None
    except ValueError:
        return None
    providers = content.get("provider") if isinstance(content, dict) else None
    declared = providers.get(provider) if isinstance(providers, dict) else None
    options = declared.get("options") if isinstance(declared, dict) else None
    base_url = options.get("baseURL") if isinstance(options, dict) else None
    return base_url if isinstance(base_url, str) and base_url else None


class OpenCodeOptions(BaseModel):
    """`[coding_agent.options]` for OpenCode (unknown keys are an error)."""

    model_config = ConfigDict(extra="forbid")

    cli_path: str | None = Field(None, description="The `opencode` executable. Default: `opencode` on PATH.")
    model: str | None = Field(None, description=(
        "OpenCode's --model, as provider/model (e.g. \"anthropic/claude-sonnet-4-5\", or a provider "
        "of your opencode.json). Default: OpenCode's own choice (its config's `model`)."))
    agent: str | None = Field(None, description="OpenCode's --agent (e.g. \"build\"). Default: its own.")
    scope_to_project: bool = Field(True, description=(
        "Keep tool calls inside the ticket's project: OpenCode's `external_directory` permission is "
        "set to deny, so a write (or read) outside the project is refused. false leaves that rule "
        "to your OpenCode config."))
    bash_allow: list[str] = Field(default_factory=list, description=(
        "Shell commands OpenCode may run, as its bash permission patterns (e.g. \"pytest *\", "
        "\"git status\"); every other command is refused, since nobody is there to approve it. "
        "With scope_to_project a bare \"*\" is refused (a shell command can write anywhere)."))
    permission: dict[str, Any] = Field(default_factory=dict, description=(
        "More OpenCode permission rules, merged over the ones above (e.g. {webfetch = \"deny\"}). "
        "With scope_to_project, external_directory and bash cannot be set here."))
    turn_timeout_s: float = Field(900, gt=0, description=(
        "Seconds one turn may take; then OpenCode's whole process group is killed."))
    extra_args: list[str] = Field(default_factory=list, description=(
        "More command-line arguments for `opencode run`, appended as given (e.g. [\"--variant\", \"high\"])."))
    price: TokenPrice | None = Field(None, description=(
        "USD per million tokens ({input, output, cached_input}) a turn's tokens are counted at, for "
        "max_cost_usd (never less than OpenCode reports). Default: OpenCode's own cost; for a model it "
        "has no price for, the model's list price, or the highest listed for a model not known."))

    @field_validator("bash_allow")
    @classmethod
    def _no_bare_shell(cls, patterns: list[str], info: ValidationInfo) -> list[str]:
        if info.data.get("scope_to_project", True) and any(p.strip() in ("*", "**") for p in patterns):
            raise ValueError("bash_allow = [\"*\"] lets any shell command write outside the project; "
                             "list the commands (e.g. \"pytest *\") or set scope_to_project = false")
        return patterns

    @field_validator("permission")
    @classmethod
    def _scoped_rules_stay(cls, rules: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if info.data.get("scope_to_project", True):
            taken = sorted({"external_directory", "bash"} & set(rules))
            if taken:
                raise ValueError(f"permission.{taken[0]} is set by scope_to_project (use bash_allow for "
                                 "commands), or set scope_to_project = false")
        for key, value in rules.items():
            if isinstance(value, str) and value not in _PERMISSIONS:
                raise ValueError(f"permission.{key} = {value!r}: use one of {', '.join(_PERMISSIONS)}")
        return rules


class OpenCodeAgent:
    """Runs OpenCode headless in the ticket's project directory, one process per turn."""

    kind: ClassVar[str] = "opencode"
    title: ClassVar[str] = "OpenCode"  # how messages name it
    Options: ClassVar[type[OpenCodeOptions]] = OpenCodeOptions

    def __init__(self, options: OpenCodeOptions | None = None, env: dict[str, str] | None = None, *,
                 table: str = OPTIONS_TABLE):
        self.options = options or OpenCodeOptions()
        self.table = table  # the options table its messages name (base.OPTIONS_TABLE)
        self.env = dict(env or {})  # merged over os.environ for the child (e.g. an offline setup's)
        self._processes = TurnProcesses("OpenCode")
        # Our session id -> OpenCode's, as seen in this process; otherwise found by title (below).
        self._sessions: dict[str, str] = {}

    @classmethod
    def offline(cls, responder: Any, workdir: Path) -> ContextManager[Offline]:
        """OpenCode pointed at the fake Chat Completions API answering from `responder`, with its
        home, config, data and cache dirs under `workdir` (see opencode_offline.py)."""
        from .opencode_offline import opencode_offline

        return opencode_offline(responder, workdir)

    @classmethod
    def find_cli(cls, options: OpenCodeOptions | None = None, path: str | None = None,
                 table: str = OPTIONS_TABLE) -> str:
        """The `opencode` executable these options run; CodingAgentError (with the install command) if none."""
        configured = (options or OpenCodeOptions()).cli_path
        name = configured or "opencode"
        found = find_executable(configured, "opencode", path=path if path is not None else os.environ.get("PATH"))
        if found is None:
            raise CodingAgentError(f"OpenCode's CLI `{name}` was not found. Install it with `{INSTALL}`, "
                                   f"or set `{table} cli_path` to the `opencode` executable.")
        return found

    @classmethod
    def follow_provider(cls, options: dict[str, Any], agent: Any,
                        environ: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
        """With `[agent] provider = "openai-compatible"`, OpenCode asks the same server and model
        unless its own `model` is set: a provider `middle` (OpenCode's bundled
        @ai-sdk/openai-compatible) is declared in the inline config, its key read from the variable
        `[agent] api_key_env` names (OpenCode's `{env:NAME}`), merged over any inline config given."""
        if agent.provider != "openai-compatible" or options.get("model"):
            return {}, {}
        provider: dict[str, Any] = {"npm": "@ai-sdk/openai-compatible", "name": "middle (from [agent])",
                                    "options": {"baseURL": agent.base_url},
                                    "models": {agent.model: {"name": agent.model}}}
        if agent.api_key_env:
            provider["options"]["apiKey"] = "{env:" + agent.api_key_env + "}"
        try:
            given = json.loads(environ.get("OPENCODE_CONFIG_CONTENT") or "{}")
        except ValueError:
            given = {}
        content = given if isinstance(given, dict) else {}
        given_providers = content.get("provider")
        providers: dict[str, Any] = given_providers if isinstance(given_providers, dict) else {}
        content = {**content, "provider": {**providers, "middle": provider}}
        return {"model": f"middle/{agent.model}"}, {"OPENCODE_CONFIG_CONTENT": json.dumps(content)}

    @classmethod
    def model_base_url(cls, options: OpenCodeOptions, environ: Mapping[str, str]) -> str | None:
        """The baseURL OpenCode's config declares for the model's provider, asked before the first
        turn (reachable.py): OpenCode retries one nothing answers at until the turn times out."""
        return opencode_base_url(options.model, environ)

    @classmethod
    def pricing(cls, options: OpenCodeOptions, environ: Mapping[str, str] | None = None) -> str:
        """What its turns count at (`middle doctor`): OpenCode prices only the models it has prices for."""
        return reported_or_priced("OpenCode", options.model, options.price,
                                  opencode_base_url(options.model, environ or os.environ))

    def stop_all(self, why: str = "interrupted by the user") -> int:
        """Kill every running turn's process group; each of those `run_turn` calls raises RunInterrupted."""
        return self._processes.stop_all(why)

    def config(self) -> dict[str, Any]:
        """The config given to OpenCode through OPENCODE_CONFIG_CONTENT: no updates, no sharing,
        and the permission rules that keep it in the project and away from anyone to ask."""
        o = self.options
        permission: dict[str, Any] = {"edit": "allow"}
        if o.scope_to_project:
            # "*" first: OpenCode takes the last rule that matches.
            permission["bash"] = {"*": "deny", **{p: "allow" for p in o.bash_allow}}
            permission["external_directory"] = "deny"
        permission.update(o.permission)
        return {"autoupdate": False, "share": "disabled", "permission": permission}

    def command(self, cli: str, cwd: Path, *, their_session: str | None, title: str | None) -> list[str]:
        """The argv for one turn in `cwd`; the prompt goes to stdin (no argument size limit, and a
        prompt starting with "-" cannot be taken for an option)."""
        o = self.options
        # Its errors' causes on stderr: the JSON stream says only "Unexpected server error" for a
        # model it does not have (ProviderModelNotFoundError), which the user must be told.
        cmd = [cli, "run", "--format", "json", "--dir", str(cwd), "--print-logs", "--log-level", "ERROR"]
        if o.model:
            cmd += ["--model", o.model]
        if o.agent:
            cmd += ["--agent", o.agent]
        if their_session:
            cmd += ["--session", their_session]
        elif title:
            cmd += ["--title", title]
        return cmd + list(o.extra_args)

    def _env(self, cwd: Path) -> dict[str, str]:
        env = {**os.environ, **self.env}
        content: dict[str, Any] = {}
        try:  # a config the caller's environment already gives inline: ours is merged over it
            given = json.loads(env.get("OPENCODE_CONFIG_CONTENT") or "{}")
            content = given if isinstance(given, dict) else {}
        except ValueError:
            content = {}
        ours = self.config()
        ours["permission"] = {**(content.get("permission") or {}), **ours["permission"]} \
            if isinstance(content.get("permission"), dict) else ours["permission"]
        env.update({"OPENCODE_CONFIG_CONTENT": json.dumps({**content, **ours}), "PWD": str(cwd),
                    "OPENCODE_DISABLE_AUTOUPDATE": "1"})
        return env

    def run_turn(self, prompt: str, cwd: Path, *, session_id: str | None, resume: bool,
                 on_event: EventCallback | None = None) -> TurnResult:
        if resume and not session_id:
            raise ValueError("resume=True needs the session_id of the session to resume")
        cwd = Path(cwd).resolve()
        if not cwd.is_dir():
            raise CodingAgentError(f"The project directory {cwd} does not exist, so OpenCode cannot run "
                                   "there. Create it or fix the ticket's project path.")
        env = self._env(cwd)
        cli = self.find_cli(self.options, env.get("PATH"), self.table)
        emit = safe_callback(on_event)
        # OpenCode (a Bun binary) unpacks a 5.5 MB native library into $TMPDIR on every start and
        # never removes it: each turn gets a TMPDIR of its own, removed after it.
        with turn_tmpdir("middle-opencode-tmp-", env.get("TMPDIR") or None) as tmp:
            env = {**env, "TMPDIR": tmp}
            their = None
            if resume and session_id:
                their = self._their_session(cli, cwd, env, session_id)
                if their is None:
                    return self._lost(session_id)
            return self._run_once(cli, prompt, cwd, env, session_id, their, emit)

    def _their_session(self, cli: str, cwd: Path, env: dict[str, str], session_id: str) -> str | None:
        """OpenCode's id of our session. Why the title: OpenCode stores it with the session when
        it creates it, before the first model call, so a `middle` that crashed before it saw the
        id (or another process taking the ticket over) still finds it; no file of ours to keep in
        step. An id of OpenCode's own (ses_...) is taken as it is."""
        if session_id in self._sessions:
            return self._sessions[session_id]
        if session_id.startswith("ses_"):
            return session_id
        out: list[bytes] = []
        outcome = self._processes.run(
            [cli, "session", "list", "--format", "json"], cwd=cwd, env=env, stdin=None,
            timeout_s=_LOOKUP_TIMEOUT_S, mark=session_id, on_line=out.append, emit=lambda _e: None)
        try:
            sessions = json.loads(b"".join(out) or b"[]") if outcome.exit_code == 0 else []
        except ValueError:
            sessions = []
        titled = [s for s in sessions if isinstance(s, dict) and s.get("title") == TITLE_PREFIX + session_id]
        if not titled:
            return None
        found = str(max(titled, key=lambda s: s.get("updated") or 0).get("id"))
        self._sessions[session_id] = found
        return found

    def _lost(self, session_id: str) -> TurnResult:
        # "to resume here": the graph then starts a new session told what the earlier turns did.
        return TurnResult(session_id=session_id, text="", is_error=True, exit_code=None, error=(
            f"OpenCode has no session titled {TITLE_PREFIX}{session_id} to resume here (its sessions live "
            "in its data dir, $XDG_DATA_HOME/opencode, per project). Start a new session for this ticket."))

    def _run_once(self, cli: str, prompt: str, cwd: Path, env: dict[str, str], session_id: str | None,
                  their: str | None, emit: EventCallback) -> TurnResult:
        title = TITLE_PREFIX + session_id if session_id and not their else None
        cmd = self.command(cli, cwd, their_session=their, title=title)
        stream = OpenCodeStream()
        # Its log says each failed attempt to reach the model API, and it retries until the turn's
        # timeout (a server that went away mid-turn): seen here, the turn ends after a short grace.
        unreachable = LogWatch(lambda said: _UNREACHABLE if _UNREACHABLE in said else None)

        def on_line(line: bytes) -> None:
            events = stream.feed(line)
            for event in events:
                emit(event)
            if events:
                unreachable.progressed()  # it got through after all (the server came back)
            if session_id and stream.session_id:
                self._sessions.setdefault(session_id, stream.session_id)

        outcome = self._processes.run(
            cmd, cwd=cwd, env=env, stdin=prompt, timeout_s=self.options.turn_timeout_s,
            mark=session_id or uuid.uuid4().hex, on_line=on_line, answered=lambda: stream.answered,
            stuck=lambda: unreachable.stuck(stream.answered), on_stderr=unreachable.on_stderr, emit=emit,
            start_event={"session_id": session_id, "resume": their is not None, "cwd": str(cwd)},
            install_hint=f"Install it with `{INSTALL}`.")
        failed = outcome.timed_out or outcome.exit_code != 0 or stream.error is not None or not stream.finished
        turn = TurnResult(
            session_id=session_id or stream.session_id, text=stream.text, is_error=failed,
            cost_usd=self._cost(stream), usage=dict(stream.tokens), num_turns=stream.steps,
            duration_ms=outcome.elapsed_ms, exit_code=outcome.exit_code,
            # (a model it does not have: the model API's kind of error, graph.nodes stops the batch)
            terminal_reason="api_error" if _gone(outcome)
            else "timeout" if outcome.timed_out else (
                "api_error" if failed and _NO_MODEL.search(outcome.stderr) else "error" if failed else "completed"),
            api_error_status=status_of(stream.api_error_status, stream.error_message()) if stream.error is not None
            else None, permission_denials=list(stream.permission_denials))
        if failed:
            turn.error = self._explain(stream, outcome, session_id)
        emit({"type": "result", "is_error": turn.is_error, "session_id": turn.session_id,
              "cost_usd": turn.cost_usd, "num_turns": turn.num_turns, "duration_ms": turn.duration_ms,
              "terminal_reason": turn.terminal_reason, "text": turn.text[:2000],
              "permission_denials": turn.permission_denials})
        return turn

    def _cost(self, stream: OpenCodeStream) -> float:
        """The turn's cost for the spending limits: OpenCode's own (part.cost), or, for a model it has
        no price for (part.cost 0), its tokens priced by pricing.py."""
        base_url = opencode_base_url(self.options.model, {**os.environ, **self.env})
        price = price_for(self.options.model, ANY_PRICES, self.options.price, base_url=base_url)[0]
        return counted_cost(stream.cost_usd, stream.priced_usage(), price, configured=self.options.price is not None)

    def _explain(self, stream: OpenCodeStream, outcome: ProcessOutcome, session_id: str | None) -> str:
        """One or two sentences: what happened, and what to do about it."""
        exit_code, timed_out = outcome.exit_code, outcome.timed_out
        stderr = _ANSI.sub("", outcome.stderr)
        err = tail(stderr, 500)
        if _gone(outcome):  # it retries a server it cannot reach until killed
            return (f"OpenCode could not reach the model API ({_UNREACHABLE}) and kept retrying, so the turn "
                    f"was ended. {advice(CONNECT, self.table, '')}, then retry the ticket.")
        if timed_out:
            return (f"OpenCode did not finish the turn within {self.options.turn_timeout_s:g} s, so its process "
                    f"group was killed. Raise `{self.table} turn_timeout_s` or give it a smaller task.")
        status = status_of(stream.api_error_status, stream.error_message()) if stream.error is not None else None
        kind = kind_of(status, stream.error_message()) if stream.error is not None else None
        if kind is not None:  # (a context too long it words as ContextOverflowError, without the status)
            said = f" (HTTP {status})" if status is not None else ""
            todo = advice(kind, self.table, "the provider's key in your OpenCode config, or `opencode auth login`")
            return (f"OpenCode could not get an answer from the model{said}: "
                    f"{tail(stream.error_message(), 300).rstrip('.')}. {todo}, then retry the ticket.")
        missing = _NO_MODEL.search(stderr)
        if missing:  # (its stream says "Unexpected server error"; the cause is in its log, on stderr)
            return (f"OpenCode has no model {self.options.model or ''}: {missing.group(0).rstrip('.')}. Set "
                    f"`{self.table} model` to provider/model as OpenCode names it (`opencode models` lists "
                    "them), or declare its provider in opencode.json.")
        if stream.error is not None:
            return f"OpenCode reported an error: {tail(stream.error_message(), 500).rstrip('.')}."
        if "Session not found" in stderr and session_id:
            return self._lost(session_id).error or ""
        asked = _ASKED.search(stderr)
        if asked:
            return (f"OpenCode stopped the turn when it asked permission for {asked.group(1)}: nobody is there "
                    f"to grant it, so it was refused. Allow it with `{self.table} bash_allow` or "
                    "`permission`, or give a task that does not need it.")
        if exit_code is not None and exit_code < 0:
            return f"OpenCode was killed by signal {-exit_code}{f' (stderr: {err})' if err else ''}."
        if exit_code not in (0, None):
            return (f"OpenCode exited with code {exit_code}{f' (stderr: {err})' if err else ''}. Check "
                    f"`{self.table}` (model, extra_args) and that `opencode --version` runs.")
        return (f"OpenCode ended the turn without an answer{f' (stderr: {err})' if err else ''}. Check "
                "that its model is configured (`opencode models`).")


def _gone(outcome: ProcessOutcome) -> bool:
    """The model API could not be reached: the turn was ended as stuck on it, or (a log line the
    grace did not see through) timed out with its log saying so."""
    return outcome.stuck is not None or (outcome.timed_out and _UNREACHABLE in outcome.stderr)
