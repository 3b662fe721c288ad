"""The Gemini CLI worker: one headless `gemini -p` process per turn, its stream-json parsed live.

Sessions: Gemini CLI 0.61 starts a session under an id we give it (`--session-id UUID`) and
resumes it by that id (`--resume UUID`), so OUR session id is ITS session id (or, for an id it
would refuse, a UUID derived from ours: cli_session_id) and no mapping file is kept. Its
sessions live in its home (`home_dir`, else the user's ~/.gemini) under the project directory's
name. A crash between launch and the next turn is handled both ways: a first turn retried after
the CLI already created the session ("already exists") resumes it; a resume of a session the CLI
never wrote ("Invalid session identifier", or "No previous sessions found" when the project has
none) fails with the sentence the ticket graph recognises (`rounds.session_lost`), which then
starts a new session told what the earlier turns did.

Confinement: the CLI's file tools (write_file, replace) refuse any path outside its workspace
directories (the project directory plus `include_directories`) in every approval mode; its shell
tool is only offered in "yolo" mode, where a command could write anywhere, so that mode is
refused unless `confine_writes` is false.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from ..errors import CodingAgentError
from ..executables import find_executable
from .api_errors import CONNECT, advice, kind_of, status_of
from .base import OPTIONS_TABLE, EventCallback, Offline, TurnResult
from .gemini_stream import GeminiStream, api_status, as_dict, usage_of
from .pricing import GEMINI_PRICES, TokenPrice, price_for, turn_cost
from .process import LogWatch, ProcessOutcome, TurnProcesses, safe_callback, tail

__all__ = ["GeminiOptions", "GeminiAgent", "INSTALL_COMMAND", "cli_session_id", "find_gemini_cli"]

INSTALL_COMMAND = "npm install -g @google/gemini-cli@0.61.0"
def install_hint(table: str = OPTIONS_TABLE) -> str:
    """How to get the Gemini CLI, naming the options table its `cli_path` is set in."""
    return (f"Install the Gemini CLI with `{INSTALL_COMMAND}`, or set `{table} cli_path` "
            "in middle.toml to the `gemini` executable.")
_NAME = "Gemini CLI"
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
# Its log line (stderr) for each retry of a model call (0.61: "Attempt 1 failed. Retrying with
# backoff... Error: exception TypeError: fetch failed sending request" for a server that is gone); it
# retries up to its `general.maxAttempts` (10) with growing waits, minutes in all.
_RETRYING = "Retrying with backoff"


class GeminiOptions(BaseModel):
    """`[coding_agent.options]` for the Gemini CLI (unknown keys are an error)."""

    model_config = ConfigDict(extra="forbid")

    cli_path: str | None = Field(None, description="The `gemini` executable. Default: `gemini` on PATH.")
    model: str | None = Field(None, description=(
        "Gemini CLI's --model (e.g. \"gemini-2.5-pro\"). Default: the CLI's own choice (\"auto\", "
        "which routes each request between models)."))
    confine_writes: bool = Field(True, description=(
        "Keep writes inside the ticket's project (and include_directories): the CLI's file tools "
        "refuse paths outside its workspace, and approval_mode \"yolo\" (which also lets its shell "
        "tool run any command) is refused. false allows \"yolo\"."))
    approval_mode: Literal["auto_edit", "default", "plan", "yolo"] = Field("auto_edit", description=(
        "Gemini CLI's --approval-mode. auto_edit approves its file edits without asking; anything "
        "needing a person (its shell tool) is not offered, since nobody is there to answer. "
        "plan is read-only; yolo approves everything, shell commands included."))
    include_directories: list[str] = Field(default_factory=list, description=(
        "More directories the CLI may read and write (--include-directories). Relative paths are "
        "taken from the project directory."))
    home_dir: str | None = Field(None, description=(
        "The CLI's home (GEMINI_CLI_HOME): its settings, login and sessions are read from "
        "<home_dir>/.gemini. Default: the user's home."))
    trust_workspace: bool = Field(True, description=(
        "Trust the project directory for the turn (--skip-trust); an untrusted folder makes the "
        "CLI fall back to asking before every edit, which nobody can answer in a headless turn."))
    turn_timeout_s: float = Field(900, gt=0, description=(
        "Seconds one turn may take; then the CLI's whole process group is killed."))
    extra_args: list[str] = Field(default_factory=list, description=(
        "More command-line arguments for `gemini`, appended as given (e.g. [\"--sandbox\"])."))
    price: TokenPrice | None = Field(None, description=(
        "USD per million tokens ({input, output, cached_input}) a turn's tokens are counted at, for "
        "max_cost_usd. Default: the model's list price, or the highest listed for a model not known."))

    @field_validator("approval_mode")
    @classmethod
    def _mode_keeps_writes_in_the_project(cls, mode: str, info: ValidationInfo) -> str:
        if mode == "yolo" and info.data.get("confine_writes", True):
            raise ValueError("approval_mode \"yolo\" lets the Gemini CLI run any shell command, which can "
                             "write outside the project: use \"auto_edit\", or set confine_writes = false")
        return mode


def find_gemini_cli(configured: str | None = None, *, path: str | None = None, table: str = OPTIONS_TABLE) -> str:
    """The `gemini` executable: `configured` (a name on `path` or a file), else `gemini` on `path`
    (default: this process's PATH); CodingAgentError naming the install command (and `table`,
    where `cli_path` is set) if there is none."""
    if configured:
        found = find_executable(configured, "gemini", path=path)
        if found:
            return found
        raise CodingAgentError(f"The Gemini CLI was not found at the configured `{table} "
                               f"cli_path` {configured!r} (no such executable). Fix or remove that setting. "
                               f"{install_hint(table)}")
    found = find_executable(None, "gemini", path=path)
    if not found:
        raise CodingAgentError("The Gemini CLI (the `gemini` command) is not installed or not on PATH. "
                               f"{install_hint(table)}")
    return found


def cli_session_id(ours: str) -> str:
    """The CLI's id for our session: ours itself (a UUID, as the ticket graph makes), or for an id
    the CLI would refuse or misread (it allows only letters, digits, "-" and "_"; `--resume` takes
    "latest" and a number as a pick from its list) a UUID derived from it: stable, so no stored map."""
    if _PLAIN_ID.fullmatch(ours) and not ours.isdigit() and ours != "latest":
        return ours
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"middle-agent:session:{ours}"))


class GeminiAgent:
    """Runs the Gemini CLI headless in the ticket's project directory, one process per turn."""

    kind: ClassVar[str] = "gemini"
    title: ClassVar[str] = "Gemini CLI"  # how messages name it
    Options: ClassVar[type[GeminiOptions]] = GeminiOptions

    def __init__(self, options: GeminiOptions | None = None, env: dict[str, str] | None = None, *,
                 table: str = OPTIONS_TABLE):
        self.options = options or GeminiOptions()
        self.table = table  # the options table its messages name (base.OPTIONS_TABLE)
        self.env = dict(env or {})  # merged over os.environ for the child
        self._processes = TurnProcesses(_NAME)

    @classmethod
    @contextmanager
    def offline(cls, responder: Any, workdir: Path) -> Iterator[Offline]:
        """The Gemini CLI on the local fake Gemini API answering from `responder` (see base.Offline)."""
        # Imported here: the fake is a test/demo double, never needed to run a real ticket.
        from orchestrator.fake_api.gemini import FakeGeminiAPI
        from orchestrator.fake_api.gemini_env import OFFLINE_MODEL, gemini_env, offline_home

        home = offline_home(Path(workdir) / "gemini-home")
        with FakeGeminiAPI(responder) as api:
            yield Offline(options={"home_dir": str(home), "model": OFFLINE_MODEL},
                          env=gemini_env(api.base_url, Path(workdir)),
                          requests=lambda: api.canonical("coding_agent"))

    @classmethod
    def model_base_url(cls, options: GeminiOptions, environ: Mapping[str, str]) -> str | None:
        """The model API address the user gave Gemini CLI (GOOGLE_GEMINI_BASE_URL), asked before
        the first turn (reachable.py): Gemini CLI retries one nothing answers at until the turn times out."""
        return environ.get("GOOGLE_GEMINI_BASE_URL") or None

    @classmethod
    def pricing(cls, options: GeminiOptions, environ: Mapping[str, str] | None = None) -> str:
        """What its turns are priced at (`middle doctor`): the CLI reports tokens, not money."""
        base_url = (environ or os.environ).get("GOOGLE_GEMINI_BASE_URL")
        return "turns priced at " + price_for(options.model, GEMINI_PRICES, options.price, base_url=base_url)[1]

    @classmethod
    def find_cli(cls, options: GeminiOptions | None = None, table: str = OPTIONS_TABLE) -> str:
        """The `gemini` executable these options run; CodingAgentError (with the install command) if none."""
        return find_gemini_cli((options or GeminiOptions()).cli_path, table=table)

    def stop_all(self, why: str = "interrupted by the user") -> int:
        """Kill every running turn's process group; each of those `run_turn` calls then raises
        RunInterrupted. Returns how many turns were stopped."""
        return self._processes.stop_all(why)

    def command(self, cli: str, cwd: Path, *, session_id: str | None, resume: bool) -> list[str]:
        """The argv for one turn in `cwd`. The prompt goes to stdin (`-p ""` appends nothing to
        it): no per-argument size limit, and never mistaken for a flag when it starts with "-"."""
        o = self.options
        cmd = [cli, "--output-format", "stream-json", "--approval-mode", o.approval_mode]
        if o.trust_workspace:
            cmd.append("--skip-trust")
        if o.model:
            cmd += ["--model", o.model]
        for d in self._include_dirs(cwd):
            # One flag per directory: joined with commas, a path holding a comma would be cut.
            cmd += ["--include-directories", str(d)]
        if session_id:
            cmd += ["--resume" if resume else "--session-id", cli_session_id(session_id)]
        return cmd + list(o.extra_args) + ["-p", ""]

    def _include_dirs(self, cwd: Path) -> list[Path]:
        return [(cwd / d).resolve() for d in self.options.include_directories]

    def run_turn(self, prompt: str, cwd: Path, *, session_id: str | None, resume: bool,
                 on_event: EventCallback | None = None) -> TurnResult:
        if resume and not session_id:
            raise ValueError("resume=True needs the session_id of the session to resume")
        cwd = Path(cwd)
        if not cwd.is_dir():
            raise CodingAgentError(f"The project directory {cwd.resolve()} does not exist, so the Gemini CLI "
                                   "cannot run there. Create it or fix the ticket's project path.")
        missing = [d for d in self._include_dirs(cwd) if not d.is_dir()]
        if missing:
            raise CodingAgentError(f"`{self.table} include_directories` names {missing[0]}, which "
                                   "does not exist: create it or remove it from that list.")
        # One node process: by default the CLI relaunches itself as a child node (more heap) and
        # only relays; the kernel kills the process we start with a killed `middle`
        # (die_with_parent), not that grandchild, which would run the turn on until the next
        # `middle` stopped it. Also ends its relaunch after an auto-update.
        env = {**os.environ, **self.env, "GEMINI_CLI_NO_RELAUNCH": "true"}
        if self.options.home_dir:
            env["GEMINI_CLI_HOME"] = str(Path(self.options.home_dir).expanduser())
        cli = find_gemini_cli(self.options.cli_path, path=env.get("PATH"), table=self.table)
        emit = safe_callback(on_event)
        result = self._run_once(cli, prompt, cwd, env, session_id, resume, emit)
        if not resume and session_id and result.is_error and "already exists" in (result.error or ""):
            # An earlier attempt of this turn (before a crash) already created the session; the
            # caller stored the id before launch precisely so we can pick it up again.
            emit({"type": "log", "line": f"Session {session_id} already exists; resuming it instead."})
            result = self._run_once(cli, prompt, cwd, env, session_id, True, emit)
        return result

    def _run_once(self, cli: str, prompt: str, cwd: Path, env: dict[str, str], session_id: str | None,
                  resume: bool, emit: EventCallback) -> TurnResult:
        stream = GeminiStream(session_id=session_id)
        # A model API it cannot reach (a server gone mid-turn) is retried for minutes; its log
        # says each retry: seen here, the turn ends after a short grace (process.STUCK_GRACE_S).
        unreachable = LogWatch(lambda said: said[:300] if _RETRYING in said and kind_of(None, said) == CONNECT
                               else None)

        def on_line(line: bytes) -> None:
            events = stream.feed(line)
            for event in events:
                if event.get("type") == "result":  # priced as the turn's result is
                    event["cost_usd"] = event["session_cost_usd"] = self._cost(stream, event.get("usage") or {})
                emit(event)
            if events:
                unreachable.progressed()  # it got through after all (the server came back)

        outcome = self._processes.run(
            self.command(cli, cwd, session_id=session_id, resume=resume), cwd=cwd, env=env, stdin=prompt,
            timeout_s=self.options.turn_timeout_s, mark=session_id or uuid.uuid4().hex, on_line=on_line,
            answered=lambda: stream.result is not None, stuck=lambda: unreachable.stuck(stream.result is not None),
            on_stderr=unreachable.on_stderr, emit=emit,
            start_event={"session_id": session_id, "resume": resume, "cwd": str(cwd)},
            install_hint=install_hint(self.table))
        for event in stream.finish():
            emit(event)
        return self._result(stream, outcome, session_id)

    def _cost(self, stream: GeminiStream, usage: dict[str, Any]) -> float:
        """The turn's tokens at its model's price (pricing.py): the CLI reports no cost."""
        # GOOGLE_GEMINI_BASE_URL: where the CLI sends its requests; a local server's turns cost 0.
        base_url = {**os.environ, **self.env}.get("GOOGLE_GEMINI_BASE_URL")
        return turn_cost(usage, price_for(stream.model or self.options.model, GEMINI_PRICES, self.options.price,
                                          base_url=base_url)[0])

    def _result(self, stream: GeminiStream, outcome: ProcessOutcome, session_id: str | None) -> TurnResult:
        r = stream.result or {}
        stats = as_dict(r.get("stats"))
        failed = r.get("status") != "success" or outcome.exit_code != 0 or outcome.timed_out
        # (a 404, 429 or 503 it words without the status: the words tell it, api_errors.status_of)
        status = status_of(api_status(stream.error_message), stream.error_message) if r.get("status") == "error" \
            else None
        turn = TurnResult(
            session_id=session_id or stream.session_id,  # ours: the caller resumes with it
            text=stream.text.strip(),
            is_error=failed,
            # The CLI reports tokens, not cost: priced here so the spending limits hold.
            cost_usd=self._cost(stream, usage_of(stats)),
            usage=usage_of(stats),
            num_turns=stream.responses,
            duration_ms=int(stats.get("duration_ms") or outcome.elapsed_ms),
            exit_code=outcome.exit_code,
            # (an API error it words without a status: a server it could not reach, "fetch failed")
            terminal_reason="api_error" if outcome.stuck else "timeout" if outcome.timed_out else (
                "api_error" if status or (r.get("status") == "error" and kind_of(None, stream.error_message))
                else None),
            api_error_status=status,
            permission_denials=list(stream.denials),
        )
        if failed:
            turn.error = self._explain(stream, outcome, status, session_id)
            if status is None and _signed_out(outcome.stderr):  # no key: every ticket's turn would fail so
                turn.terminal_reason = "api_error"  # (graph.nodes stops the batch: api_errors KEY)
        return turn

    def _explain(self, stream: GeminiStream, outcome: ProcessOutcome, status: int | None,
                 session_id: str | None) -> str:
        """One or two sentences: what happened, and what to do about it."""
        err = tail(outcome.stderr, 600)
        message = stream.error_message
        if outcome.stuck:  # (the retry log line ends with the error it retries)
            retried = outcome.stuck.split("Error: ", 1)[-1].rstrip("'\"")
            return (f"The Gemini CLI could not reach the model API ({retried}) and kept retrying, so the turn "
                    f"was ended. {advice(CONNECT, self.table, '')}, then retry the ticket.")
        if outcome.timed_out:
            return (f"The Gemini CLI did not finish the turn within {self.options.turn_timeout_s:g} s, so its "
                    f"process group was killed. Raise `{self.table} turn_timeout_s` or give it a "
                    "smaller task.")
        kind = kind_of(status, message)
        if kind is not None:
            said = f" (HTTP {status})" if status is not None else ""
            todo = advice(kind, self.table, "GEMINI_API_KEY, sent to GOOGLE_GEMINI_BASE_URL")
            return (f"The Gemini CLI could not get an answer from the model{said}: "
                    f"{tail(message, 300).rstrip('.')}. {todo}, then retry the ticket.")
        if "Invalid session identifier" in outcome.stderr or "No previous sessions found" in outcome.stderr:
            return (f"The Gemini CLI has no session {session_id} to resume here (its sessions live under "
                    "GEMINI_CLI_HOME/.gemini/tmp, per project directory). Start a new session for this ticket.")
        if "already exists" in outcome.stderr:
            return f"The Gemini CLI's session {session_id} already exists ({err})."
        if _signed_out(outcome.stderr):
            return ("The Gemini CLI is not signed in: set GEMINI_API_KEY (with GOOGLE_GEMINI_BASE_URL, also "
                    "`security.auth.selectedType = \"gemini-api-key\"` in its settings.json), or sign in once "
                    f"by running `gemini` (stderr: {err}).")
        if message:
            return f"The Gemini CLI reported an error: {tail(message, 500)}"
        if outcome.exit_code is not None and outcome.exit_code < 0:
            return f"The Gemini CLI was killed by signal {-outcome.exit_code}{f' (stderr: {err})' if err else ''}."
        if stream.result is None:
            return (f"The Gemini CLI exited with code {outcome.exit_code} without a result"
                    f"{f' (stderr: {err})' if err else ''}. Check the `{self.table}` settings such "
                    "as extra_args, and that `gemini --version` runs.")
        return f"The Gemini CLI exited with code {outcome.exit_code}{f' (stderr: {err})' if err else ''}."


def _signed_out(stderr: str) -> bool:
    """Whether the CLI refused to start for want of a key or sign-in ("Please set an Auth method",
    "Invalid auth method selected")."""
    return "auth method" in stderr or "GEMINI_API_KEY" in stderr
