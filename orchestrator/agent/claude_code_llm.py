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
import subprocess
import tempfile
from typing import Any

from pydantic import BaseModel

from orchestrator.errors import AgentReplyError, CodingAgentError, ModelAccessError
from orchestrator.procs.guarded import Guarded
from orchestrator.procs.orphans import current_run, model_mark, one_call

SIGN_IN = ("run `claude` once and sign in (/login) with your Claude subscription, or export ANTHROPIC_API_KEY")
# Words of Claude Code's own result when it has no usable login (2.1.330: "Not logged in · Please
# run /login", "Invalid API key · Fix external API key").
_AUTH_WORDS = ("/login", "not logged in", "invalid api key", "authentication", "oauth", "api key")


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
            if any(w in detail.lower() for w in _AUTH_WORDS):
                raise ModelAccessError(f"provider claude-code: Claude Code cannot use a model ({detail}): {SIGN_IN}")
            raise AgentReplyError(f"provider claude-code: Claude Code gave no result ({detail}); check "
                                  "`claude -p hello` works, then `middle resume`")
        self._count(result)
        if result.get("is_error"):
            self._raise(result)
        return result


    def _raise(self, result: dict[str, Any]) -> None:
        text = str(result.get("result") or result.get("subtype") or "").replace("\n", " ")[:300]
        status = result.get("api_error_status")
        if status in (401, 403) or any(w in text.lower() for w in _AUTH_WORDS):
            raise ModelAccessError(f"provider claude-code: Claude Code cannot use a model ({text}): {SIGN_IN}")
        if status == 404 or "model" in text.lower() and "not found" in text.lower():
            raise ModelAccessError(f"provider claude-code: model {self.model!r} was not found ({text}): set "
                                   "[agent] model (e.g. \"sonnet\")")
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


def call_cli(args: list[str], prompt: str, cwd: str, env: dict[str, str], timeout_s: float,
             who: str) -> tuple[str, str, int]:
    """One headless CLI call (a provider's model call through Claude Code or Codex): the prompt
    on stdin, (stdout, stderr, exit code). Started as a coding agent's turn is (procs.guarded.Guarded):
    it and everything it starts (Codex's native binary under its Node launcher) end with the call,
    with a timeout or an interruption, and with `middle` even by kill -9; its orphan marker names
    the run it works for, so the `middle` that takes a dead run over stops any leftover. A timeout
    is an AgentReplyError naming `who`."""
    guarded = Guarded.start(args, mark=one_call(model_mark(current_run())), env=env, cwd=cwd, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answered = False
    try:
        out, err = guarded.proc.communicate(prompt, timeout=timeout_s)
        answered = True
    except subprocess.TimeoutExpired:
        raise AgentReplyError(f"{who} did not answer within {timeout_s:.0f} s; try again with "
                              "`middle resume`") from None
    finally:  # (a Ctrl-C or a stop too: the call does not outlive its run)
        guarded.end()
        if not answered:  # read its pipes to their end (and close them): nothing holds them now
            try:
                guarded.proc.communicate(timeout=5)
            except (subprocess.TimeoutExpired, OSError, ValueError):
                pass
    return out, err, guarded.proc.returncode
