"""The Claude Code worker: one headless `claude -p` process per turn, its stream-json parsed live."""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import Any, ClassVar, ContextManager

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from orchestrator.claude_cli import find_claude_cli, install_hint

from ..errors import CodingAgentError
from .base import OPTIONS_TABLE, EventCallback, Offline, TurnResult
from .claude_probes import probes_removed
from .process import TurnProcesses, safe_callback, tail
from .scope import check_dirs, extra_dirs, scoped_tools, unscoped_command, unscoped_mode, writable_dirs
from .stream_json import TurnStream, permission_denials, turn_cost

__all__ = ["ClaudeCodeOptions", "ClaudeCodeAgent"]

log = logging.getLogger(__name__)

# What `claude --permission-mode` accepts (2.1.330; "default" is an alias of "manual").
PERMISSION_MODES = ("acceptEdits", "default", "manual", "dontAsk", "plan", "auto", "bypassPermissions")


class ClaudeCodeOptions(BaseModel):
    """`[coding_agent.options]` for Claude Code: the one schema of these settings (unknown keys are an error)."""

    model_config = ConfigDict(extra="forbid")

    cli_path: str | None = Field(None, description=(
        "The `claude` executable. Default: `claude` on PATH, then the copy bundled in the "
        "claude-agent-sdk wheel."))
    scope_to_project: bool = Field(True, description=(
        "Keep file writes inside the ticket's project (and additional_dirs): Write/Edit are allowed "
        "only there, and settings that would let writes escape are rejected. false passes "
        "allowed_tools unchanged (a bare \"Write\" or \"Bash\" then works on any path)."))
    permission_mode: str = Field("acceptEdits", description=(
        "Claude Code's --permission-mode. acceptEdits accepts file edits in the project without "
        "asking; anything that would need a person is refused, since nobody is there to answer."))
    allowed_tools: list[str] = Field(default_factory=lambda: ["Read", "Write", "Edit", "Glob", "Grep"],
                                     description=(
        "Permission rules for tools Claude Code may use without asking (--allowedTools), e.g. "
        "\"Read\", \"Edit\", \"Bash(pytest *)\". With scope_to_project, Write/Edit become "
        "\"Edit(//<project>/**)\" and a bare \"Bash\" is refused (a shell command can write anywhere)."))
    additional_dirs: list[str] = Field(default_factory=list, description=(
        "More directories Claude Code may read and write (--add-dir), e.g. a shared library next "
        "to the project. Relative paths are taken from the project directory."))
    model: str | None = Field(None, description="Claude Code's --model. Default: Claude Code's own choice.")
    max_turns: int | None = Field(None, gt=0, description=(
        "Claude Code's own cap on model round trips within one turn (--max-turns). Default: none."))
    turn_timeout_s: float = Field(900, gt=0, description=(
        "Seconds one turn may take; then Claude Code's whole process group is killed."))
    extra_args: list[str] = Field(default_factory=list, description=(
        "More command-line arguments for `claude`, appended as given (e.g. [\"--restricted\"])."))
    follow_provider: bool = Field(True, description=(
        "With [agent] provider \"bedrock\" or \"vertex\", run Claude Code on the same cloud "
        "(CLAUDE_CODE_USE_BEDROCK / _VERTEX with [agent]'s region, profile, project and base_url), "
        "unless the environment already sets a CLAUDE_CODE_USE_* variable. false: Claude Code uses "
        "its own login or ANTHROPIC_API_KEY."))

    # scope_to_project is declared before the two fields below so that they can see it.
    @field_validator("permission_mode")
    @classmethod
    def _mode_keeps_writes_in_the_project(cls, mode: str, info: ValidationInfo) -> str:
        if mode not in PERMISSION_MODES:  # checked at config load, not after the first paid call
            raise ValueError(f"{mode!r} is not a Claude Code permission mode: use one of "
                             f"{', '.join(PERMISSION_MODES)}")
        problem = info.data.get("scope_to_project", True) and unscoped_mode(mode)
        if problem:
            raise ValueError(problem)
        return mode

    @field_validator("allowed_tools")
    @classmethod
    def _tools_keep_writes_in_the_project(cls, tools: list[str], info: ValidationInfo) -> list[str]:
        problem = info.data.get("scope_to_project", True) and unscoped_command(tools)
        if problem:
            raise ValueError(problem)
        return tools


class ClaudeCodeAgent:
    """Runs Claude Code headless in the ticket's project directory, one process per turn."""

    kind: ClassVar[str] = "claude-code"
    title: ClassVar[str] = "Claude Code"  # how messages name it
    Options: ClassVar[type[ClaudeCodeOptions]] = ClaudeCodeOptions

    def __init__(self, options: ClaudeCodeOptions | None = None, env: dict[str, str] | None = None, *,
                 table: str = OPTIONS_TABLE):
        self.options = options or ClaudeCodeOptions()
        self.table = table  # the options table its messages name (base.OPTIONS_TABLE)
        self.env = dict(env or {})  # merged over os.environ for the child (e.g. claude_code_env())
        # Turns running now (one per parallel ticket), so stop_all() can end every one of them.
        self._processes = TurnProcesses("Claude Code")

    @classmethod
    def offline(cls, responder: Any, workdir: Path) -> ContextManager[Offline]:
        """Claude Code on the local fake Messages API answering from `responder` (see base.Offline)."""
        from .claude_code_offline import claude_code_offline

        return claude_code_offline(responder, workdir)

    @classmethod
    def find_cli(cls, options: ClaudeCodeOptions | None = None, table: str = OPTIONS_TABLE) -> str:
        """The `claude` executable these options run; CodingAgentError (with the install command) if none."""
        return find_claude_cli((options or ClaudeCodeOptions()).cli_path, table=table)

    @classmethod
    def follow_provider(cls, options: dict[str, Any], agent: Any,
                        environ: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
        """Claude Code on the middle agent's cloud (Bedrock, Vertex): see claude_code_cloud.py."""
        if not options.get("follow_provider", True):
            return {}, {}
        from .claude_code_cloud import provider_env

        return {}, provider_env(agent, environ)

    def stop_all(self, why: str = "interrupted by the user") -> int:
        """Kill every running turn's process group (Ctrl-C, SIGTERM of a batch); each of those
        `run_turn` calls then raises RunInterrupted. Returns how many turns were stopped."""
        return self._processes.stop_all(why)

    def command(self, cli: str, cwd: Path, *, session_id: str | None, resume: bool) -> list[str]:
        """The argv for one turn in project directory `cwd`. The prompt goes to stdin (`-p` reads it
        from there), which has no per-argument size limit and cannot be mistaken for a flag when it
        starts with "-"."""
        o = self.options
        cmd = [cli, "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", o.permission_mode]
        tools = (scoped_tools(o.allowed_tools, writable_dirs(cwd, o.additional_dirs)) if o.scope_to_project
                 else list(o.allowed_tools))
        if tools:
            # One argv item per rule (the option takes several): joined with commas, a project
            # path holding a comma or space would be cut in two.
            cmd += ["--allowedTools", *tools]
        if o.additional_dirs:
            cmd += ["--add-dir", *(str(d) for d in extra_dirs(cwd, o.additional_dirs))]
        if o.model:
            cmd += ["--model", o.model]
        if o.max_turns is not None:
            cmd += ["--max-turns", str(o.max_turns)]
        if session_id:
            cmd += ["--resume" if resume else "--session-id", session_id]
        return cmd + list(o.extra_args)

    def run_turn(self, prompt: str, cwd: Path, *, session_id: str | None, resume: bool,
                 on_event: EventCallback | None = None) -> TurnResult:
        if resume and not session_id:
            raise ValueError("resume=True needs the session_id of the session to resume")
        cwd = Path(cwd)
        if not cwd.is_dir():
            raise CodingAgentError(f"The project directory {cwd.resolve()} does not exist, so Claude Code "
                              "cannot run there. Create it or fix the ticket's project path.")
        check_dirs(cwd, self.options.additional_dirs, scoped=self.options.scope_to_project, table=self.table)
        env = {**os.environ, **self.env}
        cli = find_claude_cli(self.options.cli_path, path=env.get("PATH"), table=self.table)
        emit = safe_callback(on_event)
        with probes_removed(env):  # the file-watching probe folders the turn left (claude_probes)
            result = self._run_once(cli, prompt, cwd, env, session_id, resume, emit)
            if (not resume and session_id and result.exit_code not in (0, None) and result.text == ""
                    and "already in use" in (result.error or "")):
                # An earlier attempt of this turn (e.g. before a crash) already created the session;
                # the caller stored the id before launch precisely so we can pick it up again.
                emit({"type": "log", "line": f"Session {session_id} already exists; resuming it instead."})
                result = self._run_once(cli, prompt, cwd, env, session_id, True, emit)
        return result

    def _run_once(self, cli: str, prompt: str, cwd: Path, env: dict[str, str], session_id: str | None,
                  resume: bool, emit: EventCallback) -> TurnResult:
        cmd = self.command(cli, cwd, session_id=session_id, resume=resume)
        stream = TurnStream(session_id=session_id)

        def on_line(line: bytes) -> None:
            for event in stream.feed(line):
                emit(event)

        # The prompt goes to stdin; the marker names the turn by its session id (stored before
        # launch), so a later `middle` can find this turn's processes, its tool shells included.
        outcome = self._processes.run(
            cmd, cwd=cwd, env=env, stdin=prompt, timeout_s=self.options.turn_timeout_s,
            mark=session_id or uuid.uuid4().hex, on_line=on_line,
            answered=lambda: stream.result is not None, emit=emit,
            start_event={"session_id": session_id, "resume": resume, "cwd": str(cwd)},
            install_hint=install_hint(self.table))
        return self._result(stream, outcome.exit_code, outcome.stderr, outcome.timed_out, outcome.elapsed_ms)

    def _result(
        self, stream: TurnStream, exit_code: int | None, stderr: str, timed_out: bool, elapsed_ms: int
    ) -> TurnResult:
        r = stream.result or {}
        text = r.get("result") if isinstance(r.get("result"), str) else ""
        usage = r.get("usage")
        turn = TurnResult(
            session_id=r.get("session_id") or stream.session_id,
            text=text or "",
            is_error=bool(r.get("is_error")) or exit_code != 0 or stream.result is None or timed_out,
            cost_usd=turn_cost(r),
            usage=usage if isinstance(usage, dict) else {},
            num_turns=int(r.get("num_turns") or 0),
            duration_ms=int(r.get("duration_ms") or elapsed_ms),
            exit_code=exit_code,
            terminal_reason="timeout" if timed_out else r.get("terminal_reason"),
            permission_denials=permission_denials(r),
            api_error_status=_int_or_none(r.get("api_error_status")),
        )
        if turn.is_error:
            turn.error = self._explain(r, stream, exit_code, stderr, timed_out)
        return turn

    def _explain(
        self, r: dict[str, Any], stream: TurnStream, exit_code: int | None, stderr: str, timed_out: bool
    ) -> str:
        """One or two sentences: what happened, and what to do about it."""
        err = tail(stderr)
        if timed_out:
            return (
                f"Claude Code did not finish the turn within {self.options.turn_timeout_s:g} s, so its "
                f"process group was killed. Raise `{self.table} turn_timeout_s` or give it a smaller task."
            )
        if r.get("api_error_status") or r.get("terminal_reason") == "api_error":
            detail = tail(r.get("result") or "", 300) or r.get("api_error_type") or "no details"
            return (
                f"Claude Code could not get an answer from the model (HTTP {r.get('api_error_status')}): "
                f"{detail.rstrip('.')}. Check ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY and the provider's "
                "status, then retry the ticket."
            )
        errors = "; ".join(str(e) for e in r.get("errors") or [])
        if r.get("terminal_reason") == "max_turns" or r.get("subtype") == "error_max_turns":
            return (
                f"Claude Code stopped at its own turn cap ({errors or 'max turns reached'}). Raise "
                f"`{self.table} max_turns` or split the work into smaller prompts."
            )
        if "No conversation found" in errors or "No conversation found" in stderr:
            return (
                f"Claude Code has no session {r.get('session_id') or stream.session_id} to resume here "
                "(sessions live under CLAUDE_CONFIG_DIR, per project directory). Start a new session "
                "for this ticket."
            )
        if errors:
            return f"Claude Code reported an error: {tail(errors, 500)}."
        if r.get("is_error"):
            return f"Claude Code reported an error: {tail(r.get('result') or 'no details', 500)}"
        if exit_code is not None and exit_code < 0:
            return f"Claude Code was killed by signal {-exit_code}{f' (stderr: {err})' if err else ''}."
        if stream.result is None:
            return (
                f"Claude Code exited with code {exit_code} without a result"
                f"{f' (stderr: {err})' if err else ''}. Check the `{self.table}` settings such as "
                "extra_args, and that `claude --version` runs."
            )
        return f"Claude Code exited with code {exit_code}{f' (stderr: {err})' if err else ''}."


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
