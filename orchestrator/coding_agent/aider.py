"""The aider worker: one headless `aider --message-file` process per turn in the ticket's worktree.

- One message per turn, `--yes-always` (nobody is there to answer; aider still never runs a shell
  command on it, those need an explicit yes), no commits (`--no-auto-commits --no-dirty-commits`:
  the ticket workflow commits), no `.gitignore` edit, no URL scraping, no update check or analytics.
- A session is a directory of our session id holding aider's chat history (`--chat-history-file`),
  input and LLM history, its repo-map cache and the message: nothing in the work tree. A later turn
  passes `--restore-chat-history`, so the model sees the earlier turns. aider has no session id of
  its own, so there is no mapping to keep: a crash between launch and anything else leaves the
  directory, and the retried turn continues it.
- Where the directories live: `sessions_dir`, else inside the worktree's git directory
  (`.git/worktrees/<name>/middle-aider/` for a ticket's worktree: removed with it, and never part
  of the work tree), else `$XDG_STATE_HOME/middle-agent/aider`.
- Writes stay in the project: aider's own Python runs it behind middle's guard (aider_launch.py).
- Its stdout gives progress, tokens and cost (aider_output.py); the turn's text is the model's
  replies from the LLM history file, as sent, and the edits aider applied.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import CodingAgentError, GitError
from .aider_launch import CANNOT_IMPORT, INSTALL_HINT, find_aider, interpreter_of, launcher_argv
from .aider_output import API_ERROR_STATUS, AiderOutput, replies_since
from .api_errors import CONNECT, CONTEXT, advice, kind_of
from .base import OPTIONS_TABLE, EventCallback, Offline, TurnResult
from .pricing import ANY_PRICES, TokenPrice, counted_cost, price_for, reported_or_priced
from .process import LogWatch, TurnProcesses, safe_callback, tail

__all__ = ["UNPRICED_MODEL", "AiderAgent", "AiderOptions"]

# A git identity for aider's process only when the environment sets none: without one aider writes
# "Your Name" into the repository's config. It never commits here, so the name is never used.
_IDENTITY = {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "aider (via middle)",
             "GIT_CONFIG_KEY_1": "user.email", "GIT_CONFIG_VALUE_1": "aider@middle.invalid"}
# With `project_dir_header`: the project directory, for the offline fake (fake_api.aider_chat reads it).
PROJECT_DIR_HEADER = "X-Middle-Project-Dir"
# A model API gone mid-turn, in aider's stdout: litellm's "Connection error." (or APIConnectionError) on a
# "litellm.<Name>: ..." line, each attempt of its retries (what the model writes is never such a line).
_LITELLM_LINE = "litellm."
# A model the offline fake answers as any other, with no price in aider's metadata (see offline()).
UNPRICED_MODEL = "openai/fake-aider-unpriced"


def aider_base_url(model: str | None, options: "AiderOptions", environ: Mapping[str, str]) -> str | None:
    """Where aider (litellm) sends `model`'s requests, when it can be told: openai_api_base (or
    OPENAI_API_BASE / OPENAI_BASE_URL) for an OpenAI-compatible server, OLLAMA_API_BASE (default
    http://localhost:11434) for an `ollama/` or `ollama_chat/` model. A local one prices turns at 0."""
    provider = (model or "").split("/", 1)[0].lower() if "/" in (model or "") else ""
    if provider in ("ollama", "ollama_chat"):
        return environ.get("OLLAMA_API_BASE") or "http://localhost:11434"
    return options.openai_api_base or environ.get("OPENAI_API_BASE") or environ.get("OPENAI_BASE_URL") or None


class AiderOptions(BaseModel):
    """`[coding_agent.options]` for aider (unknown keys are an error)."""

    model_config = ConfigDict(extra="forbid")

    cli_path: str | None = Field(None, description="The `aider` executable. Default: `aider` on PATH.")
    python: str | None = Field(None, description=(
        "The Python of aider's own venv, which runs aider behind middle's write guard. Default: the "
        "interpreter named on the first line of the `aider` script."))
    model: str | None = Field(None, description=(
        "aider's --model, e.g. \"sonnet\", \"openai/gpt-4.1\" (an OpenAI-compatible server: with "
        "openai_api_base). Default: aider's own choice from its config and the keys it finds."))
    openai_api_base: str | None = Field(None, description=(
        "aider's --openai-api-base: the URL of an OpenAI-compatible server, for an `openai/NAME` model."))
    edit_format: str | None = Field(None, description=(
        "aider's --edit-format (whole, diff, udiff, ...). Default: the one aider knows suits the model "
        "best. The offline fake speaks `whole`."))
    map_tokens: int | None = Field(None, ge=0, description=(
        "aider's --map-tokens: the size of the repository map it shows the model; 0 turns it off. "
        "Default: aider's."))
    confine_to_project: bool = Field(True, description=(
        "Refuse aider's edits to any path outside the ticket's project directory (symlinks followed); "
        "false leaves it to aider, which can create a file outside through a `../` path."))
    turn_timeout_s: float = Field(900, gt=0, description=(
        "Seconds one turn may take; then aider's whole process group is killed."))
    retry_timeout_s: float = Field(60, ge=0, description=(
        "How long aider keeps retrying a temporary model API error (5xx, 429) with its doubling "
        "backoff; 0: not at all. A server it cannot reach (\"Connection error\") ends the turn 5 s "
        "after aider first says so, as CONNECT (the batch stops)."))
    sessions_dir: str | None = Field(None, description=(
        "Where each session's chat history lives (a directory per session id). Default: inside the "
        "worktree's git directory, so it is removed with the worktree."))
    project_dir_header: bool = Field(False, description=(
        "Send the project directory in an X-Middle-Project-Dir header with each model request. For "
        "middle's offline fake, which has no other way to know where aider works; a real API ignores it."))
    @field_validator("sessions_dir")
    @classmethod
    def _sessions_dir_outside_the_work_tree(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).expanduser().is_absolute():
            raise ValueError(f"{value!r} is relative: give an absolute path (or one starting with ~), "
                             "since a path relative to the worktree would put aider's files in it")
        return value

    extra_args: list[str] = Field(default_factory=list, description=(
        "More aider arguments, e.g. [\"--no-auto-lint\"]. They come before middle's own, so middle's "
        "settings for commits, history files and the message win."))
    price: TokenPrice | None = Field(None, description=(
        "USD per million tokens ({input, output, cached_input}) a turn's tokens are counted at, for "
        "max_cost_usd (never less than aider reports). Default: aider's own cost; for a model it has "
        "no price for, the model's list price, or the highest listed for a model not known."))


class AiderAgent:
    """Runs aider headless in the ticket's project directory, one process per turn."""

    kind: ClassVar[str] = "aider"
    title: ClassVar[str] = "aider"  # how messages name it
    Options: ClassVar[type[AiderOptions]] = AiderOptions

    def __init__(self, options: AiderOptions | None = None, env: dict[str, str] | None = None, *,
                 table: str = OPTIONS_TABLE):
        self.options = options or AiderOptions()
        self.table = table  # the options table its messages name (base.OPTIONS_TABLE)
        self.env = dict(env or {})  # merged over os.environ for aider's process
        self._processes = TurnProcesses("aider")

    @classmethod
    @contextmanager
    def offline(cls, responder: Any, workdir: Path) -> Iterator[Offline]:
        """aider on the fake Chat Completions API answering from `responder` (see base.Offline):
        a HOME of its own under `workdir`, the model's metadata in a file (no price list fetched)."""
        from orchestrator.config.offline import FAKE_API_KEY
        from orchestrator.fake_api.aider_chat import FakeAiderAPI

        workdir = Path(workdir)
        home = workdir / "home"
        home.mkdir(parents=True, exist_ok=True)
        metadata = workdir / "model-metadata.json"
        # Known context window and prices: aider then fetches no price list and reports a cost.
        # UNPRICED_MODEL has none, as a local or custom model: aider reports no cost for it.
        window = {"max_input_tokens": 200000, "max_output_tokens": 8192, "litellm_provider": "openai", "mode": "chat"}
        metadata.write_text(json.dumps({
            "openai/fake-aider": {**window, "input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05},
            UNPRICED_MODEL: window}))
        with FakeAiderAPI(responder) as api:
            options = {"model": "openai/fake-aider", "openai_api_base": api.base_url, "edit_format": "whole",
                       "project_dir_header": True, "retry_timeout_s": 0,
                       "extra_args": ["--model-metadata-file", str(metadata)]}
            env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                   "XDG_STATE_HOME": str(home / ".local" / "state"), "OPENAI_API_KEY": FAKE_API_KEY,
                   "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
            yield Offline(options=options, env=env, requests=api.canonical_requests)

    @classmethod
    def find_cli(cls, options: AiderOptions | None = None, table: str = OPTIONS_TABLE) -> str:
        """The `aider` executable these options run; CodingAgentError (with the install command) if none."""
        return find_aider((options or AiderOptions()).cli_path, os.environ.get("PATH"), table)

    @classmethod
    def model_base_url(cls, options: AiderOptions, environ: Mapping[str, str]) -> str | None:
        """Where aider sends the model's requests when the user said (openai_api_base, an Ollama
        model's server), asked before the first turn (reachable.py): said once, not per ticket."""
        return aider_base_url(options.model, options, environ)

    @classmethod
    def pricing(cls, options: AiderOptions, environ: Mapping[str, str] | None = None) -> str:
        """What its turns count at (`middle doctor`): aider prices only the models it knows."""
        return reported_or_priced("aider", options.model, options.price,
                                  aider_base_url(options.model, options, environ or os.environ), litellm_names=True)

    @classmethod
    def doctor(cls, options: AiderOptions) -> tuple[str, str | None]:
        """Where aider is and whether it runs (`middle doctor`)."""
        try:
            cli = cls.find_cli(options)
        except CodingAgentError as exc:
            return "-", str(exc)
        try:
            done = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=60,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return cli, f"{cli} --version failed ({exc}): reinstall aider. {INSTALL_HINT}"
        if done.returncode != 0:
            return cli, f"{cli} --version exited {done.returncode}: reinstall aider. {INSTALL_HINT}"
        return f"{cli} ({done.stdout.strip()})", None

    @classmethod
    def follow_provider(cls, options: dict[str, Any], agent: Any,
                        environ: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
        """With `[agent] provider = "openai-compatible"` (a local Ollama, vLLM, LM Studio...), aider
        asks the same server and model unless its own `model` or `openai_api_base` is set: one
        config line for a team with only a local model server."""
        if agent.provider != "openai-compatible" or options.get("model") or options.get("openai_api_base"):
            return {}, {}
        key = environ.get(agent.api_key_env or "OPENAI_API_KEY") or environ.get("OPENAI_API_KEY")
        # litellm wants some key for an `openai/` model; a local server ignores it.
        return ({"model": f"openai/{agent.model}", "openai_api_base": agent.base_url},
                {"OPENAI_API_KEY": key or "no-key-local-server"})

    def stop_all(self, why: str = "interrupted by the user") -> int:
        """Kill every running turn's process group; each of those `run_turn` calls then raises
        RunInterrupted. Returns how many turns were stopped."""
        return self._processes.stop_all(why)

    # -- one turn ------------------------------------------------------------------------------
    def session_dir(self, cwd: Path, session_id: str) -> Path:
        """The directory of one session's files (see the module docstring)."""
        if self.options.sessions_dir:
            base = Path(self.options.sessions_dir).expanduser()
        elif (git_dir := _git_dir(cwd)) is not None:
            base = git_dir / "middle-aider"
        else:
            base = _state_home({**os.environ, **self.env}) / "middle-agent" / "aider"
        return base / _safe_name(session_id)

    def command(self, cli: str, python: str, cwd: Path, session: Path, *, restore: bool) -> list[str]:
        """The argv for one turn; the message is in `session`/message.md."""
        o = self.options
        conf = {"writable": [str(cwd.resolve())] if o.confine_to_project else [],
                "tags_cache": str(session / "tags-cache"), "retry_timeout_s": o.retry_timeout_s}
        cmd = [*launcher_argv(python, cli, conf), *o.extra_args,
               "--yes-always", "--no-auto-commits", "--no-dirty-commits", "--no-gitignore",
               "--no-pretty", "--no-stream", "--no-fancy-input", "--no-multiline", "--no-check-update",
               "--no-show-release-notes", "--no-analytics", "--no-detect-urls", "--disable-playwright",
               "--no-suggest-shell-commands", "--no-show-model-warnings", "--no-notifications",
               "--encoding", "utf-8",
               "--input-history-file", str(session / "input.history"),
               "--chat-history-file", str(session / "chat.md"),
               "--llm-history-file", str(session / "llm.log"),
               "--restore-chat-history" if restore else "--no-restore-chat-history"]
        if o.model:
            cmd += ["--model", o.model]
        if o.openai_api_base:
            cmd += ["--openai-api-base", o.openai_api_base]
        if o.edit_format:
            cmd += ["--edit-format", o.edit_format]
        if o.map_tokens is not None:
            cmd += ["--map-tokens", str(o.map_tokens)]
        if o.project_dir_header:
            cmd += ["--model-settings-file", str(session / "model-settings.json")]
        return cmd + ["--message-file", str(session / "message.md")]

    def run_turn(self, prompt: str, cwd: Path, *, session_id: str | None, resume: bool,
                 on_event: EventCallback | None = None) -> TurnResult:
        if resume and not session_id:
            raise ValueError("resume=True needs the session_id of the session to resume")
        cwd = Path(cwd)
        if not cwd.is_dir():
            raise CodingAgentError(f"The project directory {cwd.resolve()} does not exist, so aider cannot "
                                   "run there. Create it or fix the ticket's project path.")
        env = {**os.environ, **self.env}
        cli = find_aider(self.options.cli_path, env.get("PATH"), self.table)
        python = interpreter_of(cli, self.options.python, env.get("PATH"), self.table)
        session_id = session_id or str(uuid.uuid4())
        session = self.session_dir(cwd, session_id)
        history = session / "chat.md"
        emit = safe_callback(on_event)
        if resume and not history.is_file():
            return TurnResult(session_id=session_id, text="", is_error=True, exit_code=None,
                              error=(f"aider has no chat history of session {session_id} to resume here "
                                     f"({history} is missing: another machine, or a cleaned worktree). "
                                     "Start a new session for this ticket."))
        if not resume and history.is_file():
            # An earlier attempt of this turn (before a crash) began the session: continue it.
            emit({"type": "log", "line": f"Session {session_id} already exists; continuing it."})
        session.mkdir(parents=True, exist_ok=True)
        # A leading "/" or "!" would make aider run the message as one of its commands (a shell
        # command for "!"): a space in front keeps it a message.
        (session / "message.md").write_text(" " + prompt if prompt[:1] in "/!" else prompt, encoding="utf-8")
        if self.options.project_dir_header:
            (session / "model-settings.json").write_text(json.dumps([{"name": "aider/extra_params", "extra_params": {
                # percent-encoded: a header is latin-1, a path may be anything
                "extra_headers": {PROJECT_DIR_HEADER: quote(str(cwd.resolve()))}}}]))
        llm_log = session / "llm.log"
        offset = llm_log.stat().st_size if llm_log.is_file() else 0
        cmd = self.command(cli, python, cwd, session, restore=history.is_file())
        out = AiderOutput(cwd=cwd.resolve())
        child_env = {**env, "LITELLM_LOCAL_MODEL_COST_MAP": env.get("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
                     # aider offers to open a URL of an API error in a browser, and --yes-always
                     # accepts: `true` is the browser, so nothing opens (or hangs) here.
                     "BROWSER": "true", "COLUMNS": "10000", "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8",
                     **({} if "GIT_CONFIG_COUNT" in env else _IDENTITY)}

        # A server gone mid-turn: aider retries "Connection error." with doubling backoff for
        # retry_timeout_s (over two minutes at its 60 s, with litellm's own retries in each): ended
        # 5 s after aider first says it (process.LogWatch, as OpenCode's and the Gemini CLI's
        # retries are), as CONNECT; a later exchange (its Tokens line) clears it: it got through.
        unreachable = LogWatch(_connection_lost)

        def on_line(line: bytes) -> None:
            exchanges = out.exchanges
            for event in out.feed(line):
                emit(event)
            if out.exchanges > exchanges:
                unreachable.progressed()
            unreachable.on_stderr(line)  # (aider says it on stdout)

        outcome = self._processes.run(
            cmd, cwd=cwd, env=child_env, stdin=None, timeout_s=self.options.turn_timeout_s, mark=session_id,
            on_line=on_line, emit=emit, install_hint=INSTALL_HINT, stuck=lambda: unreachable.stuck(False),
            start_event={"session_id": session_id, "resume": resume, "cwd": str(cwd)})
        for event in out.finish():
            emit(event)
        if outcome.exit_code == CANNOT_IMPORT:
            raise CodingAgentError(f"aider could not be started: {tail(outcome.stderr, 300)}. Set "
                                   f"`{self.table} python` to the Python of aider's venv. {INSTALL_HINT}")
        replies = replies_since(llm_log, offset)
        text = "\n\n".join(replies)
        if out.applied:
            text += "\n\n" + "\n".join(f"Applied edit to {p}" for p in out.applied)
        status = API_ERROR_STATUS.get(out.api_error[0]) if out.api_error else None
        result = TurnResult(
            session_id=session_id, text=text.strip(), cost_usd=round(self._cost(out), 6), usage=dict(out.usage),
            num_turns=out.exchanges, duration_ms=outcome.elapsed_ms, exit_code=outcome.exit_code,
            terminal_reason="timeout" if outcome.timed_out else ("api_error" if out.api_error else None),
            api_error_status=status,
            permission_denials=[{"tool": "Edit", "target": os.path.normpath(cwd / p)} for p in out.refused],
            is_error=outcome.timed_out or outcome.exit_code != 0 or out.api_error is not None or not replies)
        if outcome.stuck is not None:  # ended while retrying a server it could not reach
            result.terminal_reason = "api_error"
            result.error = (f"aider could not reach the model API ({(out.api_error or ('', 'Connection error'))[1]}) "
                            f"and kept retrying, so the turn was ended. {advice(CONNECT, self.table, '')}, then "
                            "retry the ticket.")
        elif result.is_error:
            result.error = self._explain(out, outcome.exit_code, outcome.stderr, outcome.timed_out)
        emit({"type": "result", "is_error": result.is_error, "session_id": session_id, "cost_usd": result.cost_usd,
              "num_turns": result.num_turns, "duration_ms": result.duration_ms,
              "terminal_reason": result.terminal_reason, "text": result.text[:2000],
              "permission_denials": result.permission_denials})
        return result

    def _cost(self, out: AiderOutput) -> float:
        """The turn's cost for the spending limits: aider's own, or, for a model aider has no price
        for (it then reports none), its tokens priced by pricing.py."""
        model = out.model or self.options.model
        base_url = aider_base_url(model, self.options, {**os.environ, **self.env})
        price = price_for(model, ANY_PRICES, self.options.price, base_url=base_url, litellm_names=True)[0]
        return counted_cost(out.cost_usd, out.priced_usage(), price, configured=self.options.price is not None)

    def _explain(self, out: AiderOutput, exit_code: int | None, stderr: str, timed_out: bool) -> str:
        """One or two sentences: what happened, and what to do about it."""
        if timed_out:
            return (f"aider did not finish the turn within {self.options.turn_timeout_s:g} s, so its process "
                    f"group was killed. Raise `{self.table} turn_timeout_s` or give it a smaller task.")
        if out.api_error:
            name, message = out.api_error
            status = API_ERROR_STATUS.get(name)
            kind = kind_of(status, f"{name}: {message}")
            todo = (advice(kind, self.table, "the provider's key variable, e.g. OPENAI_API_KEY") if kind
                    else f"Check the model, its API key and base URL (`{self.table} model`, openai_api_base)")
            return (f"aider could not get an answer from the model ({name}{f', HTTP {status}' if status else ''}): "
                    f"{message.rstrip('.')}. {todo}, then retry the ticket.")
        where = tail(stderr, 500) or out.tail()
        if exit_code is not None and exit_code < 0:
            return f"aider was killed by signal {-exit_code}{f' ({where})' if where else ''}."
        if exit_code != 0:
            return (f"aider exited with code {exit_code}{f' ({where})' if where else ''}. Check the "
                    f"`{self.table}` settings such as extra_args, and that `aider --version` runs.")
        if "token-limits" in where:  # aider's own words for a context too long (the API's 400, or its count)
            return (f"aider could not get an answer from the model: the chat is too long for it ({where}). "
                    f"{advice(CONTEXT, self.table, '')}, then retry the ticket.")
        return (f"aider ended without a reply from the model{f' ({where})' if where else ''}. Check the model "
                "settings, then retry the ticket.")


def _connection_lost(line: str) -> str | None:
    """What a line of aider's stdout says of a model API it cannot reach (LogWatch's words), or None."""
    if line.startswith(_LITELLM_LINE) and kind_of(None, line) == CONNECT:
        return line[:300]
    return None


def _git_dir(cwd: Path) -> Path | None:
    """The worktree's own git directory (`.git/worktrees/NAME` for a linked worktree), or None."""
    from orchestrator.gitrun import git

    try:
        done = git(cwd, "rev-parse", "--absolute-git-dir", check=False)
    except GitError:  # git itself missing
        return None
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def _state_home(env: dict[str, str]) -> Path:
    return Path(env.get("XDG_STATE_HOME") or Path(env.get("HOME") or Path.home()) / ".local" / "state")


def _safe_name(session_id: str) -> str:
    """A session id as one path component (ours are UUIDs; a caller's string must not escape)."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in session_id).strip(".")
    if not name:
        raise ValueError(f"session id {session_id!r} cannot name a directory")
    return name
