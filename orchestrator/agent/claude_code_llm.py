"""`[agent] provider = "claude-code"`: the middle agent's own calls made through the Claude Code CLI,
headless and without tools, so a user signed in to Claude Code with a Claude subscription needs no
API key (Claude Code uses its own login; an ANTHROPIC_API_KEY in the environment works too).

One call is `claude -p --output-format json --tools "" --system-prompt <the middle agent's>
--json-schema <the decision's schema> --no-session-persistence`, the prompt on stdin, run in an
empty directory (no project CLAUDE.md is read); the decision comes back as the result's
`structured_output` (Claude Code 2.1.330 asks the model for it through its StructuredOutput tool).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from typing import Any

from pydantic import BaseModel

from orchestrator.errors import AgentReplyError, CodingAgentError, ModelAccessError
from orchestrator.procs.guarded import Guarded
from orchestrator.procs.orphans import current_run, model_mark, one_call

SIGN_IN = ("run `claude` once and sign in (/login) with your Claude subscription, or export ANTHROPIC_API_KEY")
# Words of Claude Code's own result when it has no usable login (2.1.330: "Not logged in · Please
# run /login", "Invalid API key · Fix external API key").
_AUTH_WORDS = ("/login", "not logged in", "invalid api key", "authentication", "oauth", "api key")
# URLs in a failure are no words of it: a path may read "/login".
_URL = re.compile(r"\bhttps?://\S+")


class ClaudeCodeLLM:
    """The middle agent's AgentLLM through `claude -p`."""

    def __init__(self, model: str, *, cli_path: str | None = None, env: dict[str, str] | None = None,
                 timeout_s: float = 300.0):
        from orchestrator.claude_cli import find_claude_cli

        try:
            self.cli = find_claude_cli(cli_path, table="[agent]")
        except CodingAgentError as exc:
            raise ModelAccessError(f"provider claude-code: {exc}") from None
        self.model, self.env, self.timeout_s = model, dict(env or {}), timeout_s
        self.usage: dict[str, float] = {"input_tokens": 0, "output_tokens": 0, "requests": 0, "cost_usd": 0.0}

    def complete(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel]) -> str:
        result = self.run(system, transcript(messages), schema=schema.model_json_schema())
        structured = result.get("structured_output")
        if isinstance(structured, dict):
            return json.dumps(structured)
        return str(result.get("result") or "")

    def ping(self) -> str:
        """One tiny call (`middle doctor`): proves Claude Code's login (or key) works."""
        return str(self.run("Reply with: ok", "ok?").get("result") or "")

    def where(self) -> str:
        return f"{self.cli} (Claude Code's login, or ANTHROPIC_API_KEY)"

    def text_llm(self, model: str) -> "ClaudeCodeTextLLM":
        """The memory tier (`[memory] llm_model`) through the same CLI."""
        return ClaudeCodeTextLLM(model, self)

    def run(self, system: str, prompt: str, *, schema: dict[str, Any] | None = None,
            model: str | None = None) -> dict[str, Any]:
        """One headless call; the CLI's result object."""
        args = [self.cli, "-p", "--output-format", "json", "--tools", "", "--system-prompt", system,
                "--model", model or self.model, "--no-session-persistence", "--strict-mcp-config",
                "--disable-slash-commands"]
        if schema is not None:
            args += ["--json-schema", json.dumps(schema)]
        with tempfile.TemporaryDirectory(prefix="middle-agent-") as cwd:
            out, err, code = call_cli(args, prompt, cwd, {**os.environ, **self.env}, self.timeout_s,
                                      "provider claude-code: Claude Code")
        try:
            result = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        except ValueError:
            result = {}
        if not isinstance(result, dict) or not result:
            detail = (err or out).strip().replace("\n", " ")[:300] or f"exit code {code}"
            if any(w in _URL.sub("", detail).lower() for w in _AUTH_WORDS):
                raise ModelAccessError(f"provider claude-code: Claude Code cannot use a model ({detail}): {SIGN_IN}")
            raise AgentReplyError(f"provider claude-code: Claude Code gave no result ({detail}); check "
                                  "`claude -p hello` works, then `middle resume`")
        self._count(result)
        if result.get("is_error"):
            self._raise(result)
        return result


    def _raise(self, result: dict[str, Any]) -> None:
        from orchestrator.api_words import too_long

        text = str(result.get("result") or result.get("subtype") or "").replace("\n", " ")[:300]
        status = result.get("api_error_status")
        if status in (401, 403) or any(w in _URL.sub("", text).lower() for w in _AUTH_WORDS):
            raise ModelAccessError(f"provider claude-code: Claude Code cannot use a model ({text}): {SIGN_IN}")
        if status == 404 or "model" in text.lower() and "not found" in text.lower():
            raise ModelAccessError(f"provider claude-code: model {self.model!r} was not found ({text}): set "
                                   "[agent] model (e.g. \"sonnet\")")
        if any(w in text.lower() for w in UNREACHABLE):
            raise ModelAccessError(f"provider claude-code: Claude Code cannot reach its API ({text}): check the "
                                   "network, or ANTHROPIC_BASE_URL when it is set")
        if too_long(text):  # (retrying the same context would be refused the same way)
            raise AgentReplyError(f"provider claude-code: the ticket's context is too long for model {self.model!r} "
                                  f"({text}): set [agent] model to one with a longer context window, then "
                                  "`middle resume`")
        raise AgentReplyError(f"provider claude-code: Claude Code's call failed ({text}); try again later "
                              "with `middle resume`")

    def _count(self, result: dict[str, Any]) -> None:
        usage = result.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        self.usage["requests"] += 1
        self.usage["input_tokens"] += int(usage.get("input_tokens") or 0)
        self.usage["output_tokens"] += int(usage.get("output_tokens") or 0)
        self.usage["cost_usd"] += float(result.get("total_cost_usd") or 0.0)


class ClaudeCodeTextLLM:
    """The cheaper memory tier (a TextLLM) through the Claude Code CLI."""

    def __init__(self, model: str, base: ClaudeCodeLLM):
        self.model, self.base = model, base

    def complete(self, system: str, prompt: str, max_tokens: int = 1024) -> str:
        return str(self.base.run(system, prompt, model=self.model).get("result") or "")


def transcript(messages: list[dict[str, str]]) -> str:
    """The conversation as one prompt: `claude -p` takes one user message, so earlier turns (a
    repair request's first reply) are quoted before the last message."""
    if len(messages) == 1:
        return messages[0]["content"]
    earlier = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages[:-1])
    return f"The conversation so far:\n\n{earlier}\n\n[user]\n{messages[-1]['content']}"


# Words of a CLI that cannot connect at all (Claude Code: "Connection refused ... (ECONNREFUSED)";
# Codex: "Reconnecting... waiting for network (Connection failed: ...)").
UNREACHABLE = ("econnrefused", "connection refused", "waiting for network", "connection failed", "unable to connect",
               "enotfound")


def last_words(out: str, err: str) -> str:
    """What a CLI said last before it was stopped: the message of its last JSON event that has
    one (Codex's "Reconnecting..." notices), else its last line of stderr."""
    for line in reversed(out.splitlines()):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("message"), str):
            return event["message"][:200]
    lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def call_cli(args: list[str], prompt: str, cwd: str, env: dict[str, str], timeout_s: float,
             who: str) -> tuple[str, str, int]:
    """One headless CLI call (a provider's model call through Claude Code or Codex): the prompt
    on stdin, (stdout, stderr, exit code). Started as a coding agent's turn is (procs.guarded.Guarded):
    it and everything it starts (Codex's native binary under its Node launcher) end with the call,
    with a timeout or an interruption, and with `middle` even by kill -9; its orphan marker names
    the run it works for, so the `middle` that takes a dead run over stops any leftover. A timeout
    is an AgentReplyError naming `who`, a CLI that says it cannot connect (Codex waits for the
    network for ever) a ModelAccessError at once."""
    guarded = Guarded.start(args, mark=one_call(model_mark(current_run())), env=env, cwd=cwd, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc = guarded.proc
    deadline = time.monotonic() + timeout_s
    given: str | None = prompt
    answered = False
    try:
        while True:
            try:
                out, err = proc.communicate(given, timeout=max(0.01, min(1.0, deadline - time.monotonic())))
                answered = True
                break
            except subprocess.TimeoutExpired as exc:
                given = None  # (sent: communicate goes on where it was, losing no output)
                said = last_words(_text(exc.output), "")
                if any(w in said.lower() for w in UNREACHABLE):
                    raise ModelAccessError(f"{who} cannot reach its model's server ({said}): check the network, "
                                           "or [agent] base_url") from None
                if time.monotonic() >= deadline:
                    raise
    except subprocess.TimeoutExpired:
        guarded.end()
        out, err = _drain(proc)
        last = last_words(out, err)
        said = f" ({last})" if last else ""
        raise AgentReplyError(f"{who} did not answer within {timeout_s:g} s{said}: try again with `middle resume`, "
                              "or raise [agent] timeout_s for a slow model") from None
    finally:  # (a Ctrl-C or a stop too: the call does not outlive its run)
        guarded.end()
        if not answered:  # read its pipes to their end (and close them): nothing holds them now
            _drain(proc)
    return out, err, proc.returncode


def _drain(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """What is left in a stopped call's pipes (its group killed: they close)."""
    try:
        out, err = proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, OSError, ValueError):
        return "", ""
    return out or "", err or ""


def _text(output: str | bytes | None) -> str:
    """A TimeoutExpired's output so far (bytes, even for a text-mode process)."""
    if isinstance(output, bytes):
        return output.decode("utf-8", "replace")
    return output or ""
