"""The Codex worker: one `codex exec --json` process per turn (OpenAI's Codex CLI, pinned 0.171.0),
its JSONL parsed live; later turns `codex exec resume <thread id>`.

Confinement: Codex's own sandbox, `workspace-write` (on Linux: a mount namespace with / read-only
and the writable roots bound read-write, plus a seccomp filter; seen working in an unprivileged
container): its shell commands can write only in the project directory (and
`additional_dirs`), and its apply_patch refuses paths outside the project. Codex makes /tmp and
$TMPDIR writable too by default; here /tmp is not (`exclude_slash_tmp`) and $TMPDIR is a private
directory made for the turn and removed after it (`private_tmp`), so a write outside the
worktree has nowhere to land. Approval policy is `never`: nobody is there to approve, so a
refused action is reported back to the model, which may work around it.

Sessions: Codex chooses its own thread id (announced in the first line, `thread.started`), while
the caller chooses our session id before launch. The mapping ours -> theirs is a small file in
Codex's own home, `$CODEX_HOME/middle-sessions/<session id>`, next to the sessions it names: they
are kept, moved or wiped together (a per-ticket CODEX_HOME keeps both per ticket). It is written
the moment `thread.started` arrives, so only a crash in the second before that loses it; a later
resume then finds no mapping and fails with "no session ... to resume here", which the graph
answers by starting a new session with a recap of the ticket (graph.rounds.session_lost).
A new turn whose session already has a mapping (a retry after a crash) resumes that thread.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, ContextManager, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import CodingAgentError
from ..executables import find_executable
from .api_errors import advice, kind_of, status_of
from .base import OPTIONS_TABLE, EventCallback, Offline, TurnResult
from .codex_events import CodexStream
from .pricing import CODEX_PRICES, TokenPrice, price_for, turn_cost
from .process import ProcessOutcome, TurnProcesses, safe_callback, tail
from .turn_tmp import turn_tmpdir

__all__ = ["CODEX_VERSION", "INSTALL_HINT", "CodexAgent", "CodexOptions", "CodexProvider"]

log = logging.getLogger(__name__)

CODEX_VERSION = "0.171.0"
INSTALL = f"npm install -g @openai/codex@{CODEX_VERSION}"
def install_hint(table: str = OPTIONS_TABLE) -> str:
    """How to get Codex, naming the options table its `cli_path` is set in."""
    return f"Install the Codex CLI with `{INSTALL}` or set `{table} cli_path`."


INSTALL_HINT = install_hint()
_THREAD_RE = re.compile(r"^[0-9a-fA-F-]{8,64}$")
_DENIED_RE = re.compile(r"error=patch rejected: ([^\n]*)")
_HTTP_500_RE = re.compile(r"currently experiencing high demand")  # see _status
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$")  # a file name, never "." or ".."
# Arguments that would switch off the sandbox or the approval policy this agent relies on.
_UNCONFINED = ("--dangerously-bypass-approvals-and-sandbox", "danger-full-access", "--sandbox", "-s",
               "--approve-for-me", "sandbox_mode", "approval_policy", "sandbox_workspace_write")


class CodexProvider(BaseModel):
    """A model provider of Codex's own (`-c model_providers.<id>...`): any server of the OpenAI
    Responses API. Without one, Codex uses its default (OpenAI, with `codex login`)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field("middle", pattern=r"^[A-Za-z0-9_-]+$", description="The provider's key in Codex's model_providers.")
    name: str = Field("middle", description="The provider's display name.")
    base_url: str = Field(..., description="The API's base URL; Codex posts to <base_url>/responses.")
    env_key: str = Field(..., description="The environment variable holding the API key (sent as Bearer).")
    request_max_retries: int | None = Field(None, ge=0, description=(
        "How often Codex retries a failed request (5xx, 429). Default: Codex's (4)."))
    stream_max_retries: int | None = Field(None, ge=0, description=(
        "How often Codex reconnects a dropped stream. Default: Codex's (5)."))


def codex_base_url(options: "CodexOptions", environ: Mapping[str, str]) -> str | None:
    """Where Codex sends its requests: the provider's base_url, else OPENAI_BASE_URL (which its
    built-in OpenAI provider reads), else OpenAI's (None). A local one prices turns at 0 (pricing.py)."""
    return options.provider.base_url if options.provider else (environ.get("OPENAI_BASE_URL") or None)


class CodexOptions(BaseModel):
    """`[coding_agent.options]` for Codex: the one schema of these settings (unknown keys are an error)."""

    model_config = ConfigDict(extra="forbid")

    cli_path: str | None = Field(None, description="The `codex` executable. Default: `codex` on PATH.")
    model: str | None = Field(None, description="Codex's --model. Default: Codex's own choice.")
    sandbox: Literal["workspace-write", "read-only"] = Field("workspace-write", description=(
        "Codex's sandbox: workspace-write lets it write only in the project directory (and "
        "additional_dirs); read-only lets it write nowhere (a dry run). Nothing unconfined is offered."))
    private_tmp: bool = Field(True, description=(
        "Give each turn its own temporary directory as TMPDIR (writable, removed after the turn) "
        "and keep /tmp read-only. false: Codex's default, /tmp and $TMPDIR writable (writes "
        "outside the project then land there)."))
    additional_dirs: list[str] = Field(default_factory=list, description=(
        "More directories Codex may write (its sandbox's writable_roots). Relative paths are "
        "taken from the project directory."))
    provider: CodexProvider | None = Field(None, description=(
        "A model provider of your own (base_url, env_key); default: Codex's (OpenAI, `codex login`)."))
    turn_timeout_s: float = Field(900, gt=0, description=(
        "Seconds one turn may take; then Codex's whole process group is killed."))
    extra_args: list[str] = Field(default_factory=list, description=(
        "More arguments for `codex exec` and `codex exec resume` (so only options both take), "
        "appended as given (e.g. [\"-c\", \"model_reasoning_effort=\\\"low\\\"\"]). "
        "Arguments that would lift the sandbox or the approval policy are refused."))
    price: TokenPrice | None = Field(None, description=(
        "USD per million tokens ({input, output, cached_input}) a turn's tokens are counted at, for "
        "max_cost_usd. Default: the model's list price, or the highest listed for a model not known."))

    @field_validator("extra_args")
    @classmethod
    def _keeps_the_sandbox(cls, args: list[str]) -> list[str]:
        for arg in args:
            # Anywhere in the argument: `--config=sandbox_mode=...` and `--sandbox=...` count too.
            if arg == "-s" or any(bad in arg for bad in _UNCONFINED if bad != "-s"):
                raise ValueError(f"{arg!r} would change Codex's sandbox or approval policy, which keep its "
                                 "writes in the project; use the `sandbox` option instead")
        return args


def _toml(value: Any) -> str:
    """A value for `-c key=value` (parsed as TOML; a JSON string or list of strings is valid TOML)."""
    return json.dumps(value)


class CodexAgent:
    """Runs the Codex CLI headless in the ticket's project directory, one process per turn."""

    kind: ClassVar[str] = "codex"
    title: ClassVar[str] = "Codex"  # how messages name it
    Options: ClassVar[type[CodexOptions]] = CodexOptions

    def __init__(self, options: CodexOptions | None = None, env: dict[str, str] | None = None, *,
                 table: str = OPTIONS_TABLE):
        self.options = options or CodexOptions()
        self.table = table  # the options table its messages name (base.OPTIONS_TABLE)
        self.env = dict(env or {})  # merged over os.environ for the child (e.g. offline()'s)
        self._processes = TurnProcesses("Codex")

    def stop_all(self, why: str = "interrupted by the user") -> int:
        """Kill every running turn's process group; each of those `run_turn` calls then raises
        RunInterrupted. Returns how many turns were stopped."""
        return self._processes.stop_all(why)

    # -- the command line ----------------------------------------------------------------------
    def command(self, cli: str, cwd: Path, *, thread_id: str | None, tmp: str | None) -> list[str]:
        """The argv for one turn; the prompt goes to stdin (`-`): no size limit, never a flag."""
        o = self.options
        cmd = [cli, "exec"]
        cmd += ["resume", "--json"] if thread_id else ["--json", "-C", str(cwd)]
        cmd += ["--skip-git-repo-check"]
        if o.model:
            cmd += ["-m", o.model]
        config: dict[str, Any] = {
            "sandbox_mode": o.sandbox,
            "approval_policy": "never",
            # No update check, analytics or feedback upload from a headless run.
            "check_for_update_on_startup": False,
            "analytics.enabled": False,
            "feedback.enabled": False,
        }
        roots = [str((cwd / d).resolve()) for d in o.additional_dirs]
        if o.private_tmp:
            config["sandbox_workspace_write.exclude_slash_tmp"] = True
            config["sandbox_workspace_write.exclude_tmpdir_env_var"] = False  # TMPDIR is the private dir
            if tmp:
                roots.append(tmp)
        if roots:
            config["sandbox_workspace_write.writable_roots"] = roots
        if o.provider is not None:
            p, key = o.provider, f"model_providers.{o.provider.id}"
            config.update({"model_provider": p.id, f"{key}.name": p.name, f"{key}.base_url": p.base_url,
                           f"{key}.env_key": p.env_key, f"{key}.wire_api": "responses"})
            if p.request_max_retries is not None:
                config[f"{key}.request_max_retries"] = p.request_max_retries
            if p.stream_max_retries is not None:
                config[f"{key}.stream_max_retries"] = p.stream_max_retries
        for k, v in config.items():
            cmd += ["-c", f"{k}={_toml(v)}"]
        cmd += list(o.extra_args)
        if thread_id:
            cmd.append(thread_id)
        return cmd + ["-"]

    # -- one turn ------------------------------------------------------------------------------
    def run_turn(self, prompt: str, cwd: Path, *, session_id: str | None, resume: bool,
                 on_event: EventCallback | None = None) -> TurnResult:
        if resume and not session_id:
            raise ValueError("resume=True needs the session_id of the session to resume")
        cwd = Path(cwd).resolve()
        if not cwd.is_dir():
            raise CodingAgentError(f"The project directory {cwd} does not exist, so Codex cannot run "
                                   "there. Create it or fix the ticket's project path.")
        env = {**os.environ, **self.env}
        cli = self._find_cli(env)
        emit = safe_callback(on_event)
        sessions = SessionMap(_codex_home(env))
        thread_id: str | None = None
        if session_id:
            try:
                thread_id = sessions.get(session_id)
            except ValueError as exc:
                return TurnResult(session_id=session_id, text="", is_error=True, exit_code=None, error=str(exc))
        if resume and thread_id is None:
            return TurnResult(
                session_id=session_id, text="", is_error=True, exit_code=None, terminal_reason="session_lost",
                error=(f"Codex has no session {session_id} to resume here: no thread was recorded for it "
                       f"under {sessions.root} (another CODEX_HOME, or middle stopped before Codex started). "
                       "Start a new session for this ticket."))
        if not resume and thread_id is not None:
            emit({"type": "log", "line": f"Session {session_id} already has Codex thread {thread_id}; "
                                         "resuming it instead."})
        with _private_tmp(self.options.private_tmp) as tmp:
            if tmp:
                env["TMPDIR"] = tmp
            return self._run_once(cli, prompt, cwd, env, session_id, thread_id, tmp, sessions, emit)

    @classmethod
    def model_base_url(cls, options: CodexOptions, environ: Mapping[str, str]) -> str | None:
        """The base URL of the user's own model provider (or OPENAI_BASE_URL), asked before the
        first turn (reachable.py): said once, not as each ticket's failed turn."""
        return codex_base_url(options, environ)

    @classmethod
    def pricing(cls, options: CodexOptions, environ: Mapping[str, str] | None = None) -> str:
        """What its turns are priced at (`middle doctor`): the CLI reports tokens, not money."""
        return "turns priced at " + price_for(options.model, CODEX_PRICES, options.price,
                                              base_url=codex_base_url(options, environ or os.environ))[1]

    @classmethod
    def find_cli(cls, options: CodexOptions | None = None, table: str = OPTIONS_TABLE) -> str:
        """The `codex` executable these options run; CodingAgentError with the install command if
        none (what `middle agents` shows)."""
        return cls(options, table=table)._find_cli(dict(os.environ))

    def _find_cli(self, env: dict[str, str]) -> str:
        cli = self.options.cli_path or "codex"
        found = find_executable(self.options.cli_path, "codex", path=env.get("PATH"))
        if found is None:
            raise CodingAgentError(f"The Codex CLI ({cli}) was not found. {install_hint(self.table)}")
        return found

    def _run_once(self, cli: str, prompt: str, cwd: Path, env: dict[str, str], session_id: str | None,
                  thread_id: str | None, tmp: str | None, sessions: "SessionMap",
                  emit: EventCallback) -> TurnResult:
        stream = CodexStream(session_id=session_id, thread_id=thread_id)

        def on_line(line: bytes) -> None:
            for event in stream.feed(line):
                if event["type"] == "init" and session_id and stream.thread_id and thread_id is None:
                    sessions.put(session_id, stream.thread_id)  # at once: see the module docstring
                emit(event)

        outcome = self._processes.run(
            self.command(cli, cwd, thread_id=thread_id, tmp=tmp), cwd=cwd, env=env, stdin=prompt,
            timeout_s=self.options.turn_timeout_s, mark=session_id or uuid.uuid4().hex, on_line=on_line,
            answered=lambda: stream.answered, emit=emit,
            start_event={"session_id": session_id, "resume": thread_id is not None, "cwd": str(cwd)},
            install_hint=install_hint(self.table))
        result = self._result(stream, outcome, session_id)
        emit(stream.result_event(result.is_error, result.duration_ms, result.cost_usd))
        return result

    def _result(self, stream: CodexStream, outcome: ProcessOutcome, session_id: str | None) -> TurnResult:
        usage = dict(stream.usage)
        is_error = outcome.timed_out or not stream.completed or outcome.exit_code not in (0, None) \
            or (outcome.exit_code is None and not outcome.lingered)
        turn = TurnResult(
            session_id=session_id, text=stream.last_text, is_error=is_error,
            # Codex reports tokens, not money: priced here so the spending limits hold.
            cost_usd=turn_cost(usage, price_for(self.options.model, CODEX_PRICES, self.options.price,
                                                base_url=codex_base_url(self.options, {**os.environ, **self.env}))[0]),
            usage=usage, num_turns=1, duration_ms=outcome.elapsed_ms, exit_code=outcome.exit_code,
            terminal_reason="timeout" if outcome.timed_out else ("completed" if stream.completed else
                                                                  "api_error" if stream.failure else "error"),
            api_error_status=status_of(stream.failure_status or _status(stream.failure), stream.failure),
            # A refused patch is not in Codex's JSONL, only logged on stderr; the model is told.
            permission_denials=[{"tool": "apply_patch", "target": m.group(1).strip()}
                                for m in _DENIED_RE.finditer(outcome.stderr)],
        )
        if turn.is_error:
            turn.error = self._explain(stream, outcome, session_id)
            if "to resume here" in turn.error:
                turn.terminal_reason = "session_lost"
        return turn

    def _explain(self, stream: CodexStream, outcome: ProcessOutcome, session_id: str | None) -> str:
        """One or two sentences: what happened, and what to do about it."""
        err = tail(outcome.stderr, 500)
        if outcome.timed_out:
            return (f"Codex did not finish the turn within {self.options.turn_timeout_s:g} s, so its process "
                    f"group was killed. Raise `{self.table} turn_timeout_s` or give it a smaller task.")
        if "no rollout found" in outcome.stderr:
            return (f"Codex has no session {session_id} to resume here (thread {stream.thread_id}; its sessions "
                    "live under CODEX_HOME). Start a new session for this ticket.")
        if stream.failure:
            status = status_of(stream.failure_status or _status(stream.failure), stream.failure)
            todo = advice(kind_of(status, stream.failure), self.table, "the provider's env_key, or `codex login`")
            said = f" (HTTP {status})" if status is not None else ""
            return (f"Codex could not get an answer from the model{said}: "
                    f"{tail(stream.failure, 400).rstrip('.')}. {todo}, then retry the ticket.")
        if outcome.exit_code is not None and outcome.exit_code < 0:
            return f"Codex was killed by signal {-outcome.exit_code}{f' (stderr: {err})' if err else ''}."
        return (f"Codex exited with code {outcome.exit_code} without finishing the turn"
                f"{f' (stderr: {err})' if err else ''}. Check `{self.table}` (extra_args, model) "
                "and that `codex --version` runs.")

    # -- offline: the fake Responses API -------------------------------------------------------
    @classmethod
    def offline(cls, responder: Any, workdir: Path) -> ContextManager[Offline]:
        """Codex on the local fake Responses API answering from `responder` (see base.Offline and
        codex_offline)."""
        from .codex_offline import codex_offline

        return codex_offline(responder, workdir)


class SessionMap:
    """Our session id -> Codex's thread id, one small file each under `<CODEX_HOME>/middle-sessions`."""

    def __init__(self, codex_home: Path):
        self.root = codex_home / "middle-sessions"

    def _path(self, session_id: str) -> Path:
        name = session_id if _SAFE_NAME.match(session_id) else uuid.uuid5(uuid.NAMESPACE_OID, session_id).hex
        return self.root / name

    def get(self, session_id: str) -> str | None:
        """The recorded thread id; None when there is none. A file that is not a thread id is an
        error naming it (stored state is not trusted)."""
        path = self._path(session_id)
        try:
            text = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"Cannot read Codex's session record {path}: {exc}. Delete it to start a new "
                             "session for this ticket.") from exc
        if not _THREAD_RE.match(text):
            raise ValueError(f"Codex's session record {path} does not hold a thread id (corrupt?). Delete it "
                             "to start a new session for this ticket.")
        return text

    def put(self, session_id: str, thread_id: str) -> None:
        if not _THREAD_RE.match(thread_id):
            log.warning("Codex announced an odd thread id %r; not recorded", thread_id)
            return
        path = self._path(session_id)
        partial = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(thread_id + "\n", encoding="utf-8")
            partial.replace(path)  # atomic: a crash leaves the old record or the new one, never half
        except OSError as exc:
            # The turn itself goes on; its next turn then finds no record and starts a new session
            # told the earlier work (as after a crash).
            log.warning("could not record Codex thread %s for session %s in %s: %s", thread_id, session_id,
                        path, exc)


def _codex_home(env: dict[str, str]) -> Path:
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"])
    return Path(env.get("HOME") or Path.home()) / ".codex"


@contextmanager
def _private_tmp(enabled: bool) -> Iterator[str | None]:
    if not enabled:
        yield None
        return
    with turn_tmpdir("middle-codex-tmp-") as tmp:  # (one a kill -9 left: removed by a later turn)
        yield tmp


def _status(failure: str | None) -> int | None:
    """The HTTP status in Codex's failure message ("unexpected status 401 Unauthorized: ..."), if any.
    An HTTP 500 Codex words as its own sentence, naming no status (0.171's InternalServerError:
    "We're currently experiencing high demand, ..."): that sentence is the 500."""
    if not failure:
        return None
    found = re.search(r"\b(?:status|HTTP)\s*:?\s*([1-5]\d\d)\b", failure)
    if found:
        return int(found.group(1))
    return 500 if _HTTP_500_RE.search(failure) else None
