"""`[agent] provider = "codex"`: the middle agent's own calls made through the Codex CLI, headless,
so a user signed in to Codex (`codex login` with a ChatGPT plan) needs no API key at all, and
the same login serves the coding agent (`[coding_agent] kind = "codex"`).

One call is `codex exec --json --ephemeral --sandbox read-only --output-schema <the decision's
schema>` with the middle agent's system prompt as Codex's instructions
(`model_instructions_file`), the prompt on stdin, run in an empty directory (no AGENTS.md is
read, nothing can be written). The decision is Codex's last message, which the schema shapes.
`base_url` and `api_key_env` point it at any server of the OpenAI Responses API instead of
Codex's own login (as `[coding_agent.options] provider` does for the coding agent).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from orchestrator.agent.claude_code_llm import call_cli, transcript
from orchestrator.errors import AgentReplyError, ModelAccessError

CODEX_VERSION = "0.171.0"  # the version the coding agent pins (orchestrator/coding_agent/codex.py)
INSTALL = f"npm install -g @openai/codex@{CODEX_VERSION}"
SIGN_IN = "run `codex login` (a ChatGPT plan) or set [agent] base_url and api_key_env"
# Words of Codex's failure when it has no usable login or key (a 401 is read as its status: as a
# word, "401" was found in a URL's port, and a 503 from port 40127 was taken for a refusal).
_AUTH_WORDS = ("unauthorized", "not logged in", "login", "api key", "authentication")
# URLs in a failure are no words of it: a host or path may read "login".
_URL = re.compile(r"\bhttps?://\S+")
# Codex names the HTTP status it got: "unexpected status 404 Not Found", "last status: 429 ...".
_STATUS = re.compile(r"status:? (\d{3})\b")
# Claude's model names are the config's default; Codex is then left to choose its own.
_CLAUDE_DEFAULT = "claude-"


class CodexLLM:
    """The middle agent's AgentLLM through `codex exec`."""

    def __init__(self, model: str, *, cli_path: str | None = None, base_url: str | None = None,
                 api_key_env: str | None = None, env: dict[str, str] | None = None, timeout_s: float = 300.0):
        self.env = dict(env or {})
        found = shutil.which(cli_path or "codex", path={**os.environ, **self.env}.get("PATH"))
        if found is None:
            raise ModelAccessError(f"provider codex: the Codex CLI ({cli_path or 'codex'}) was not found: "
                                   f"install it with `{INSTALL}` or set [agent] cli_path")
        self.cli, self.model, self.timeout_s = found, model, timeout_s
        self.base_url, self.api_key_env = base_url, api_key_env
        self.usage: dict[str, float] = {"input_tokens": 0, "output_tokens": 0, "requests": 0, "cost_usd": 0.0}

    def complete(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel]) -> str:
        return self.run(system, transcript(messages), schema=schema.model_json_schema())

    def ping(self) -> str:
        """One tiny call (`middle doctor`): proves Codex's login (or key) works."""
        return self.run("Reply with: ok", "ok?")

    def where(self) -> str:
        return f"{self.cli} ({self.base_url or 'Codex login, or its configured provider'})"

    def text_llm(self, model: str) -> "CodexTextLLM":
        """The memory tier (`[memory] llm_model`) through the same CLI."""
        return CodexTextLLM(model, self)

    def command(self, cwd: str, instructions: Path, schema: Path | None, model: str | None) -> list[str]:
        config: dict[str, Any] = {
            "model_instructions_file": str(instructions),
            "approval_policy": "never",
            "check_for_update_on_startup": False,
            "analytics.enabled": False,
            "feedback.enabled": False,
        }
        if self.base_url:
            key = "model_providers.middle"
            config.update({"model_provider": "middle", f"{key}.name": "middle", f"{key}.base_url": self.base_url,
                           f"{key}.env_key": self.api_key_env or "OPENAI_API_KEY", f"{key}.wire_api": "responses"})
        cmd = [self.cli, "exec", "--json", "--ephemeral", "--skip-git-repo-check", "--sandbox", "read-only",
               "-C", cwd]
        chosen = model or self.model
        if chosen and not chosen.startswith(_CLAUDE_DEFAULT):
            cmd += ["-m", chosen]
        if schema is not None:
            cmd += ["--output-schema", str(schema)]
        for k, v in config.items():
            cmd += ["-c", f"{k}={json.dumps(v)}"]  # a JSON string, bool or number is valid TOML
        return cmd + ["-"]

    def run(self, system: str, prompt: str, *, schema: dict[str, Any] | None = None,
            model: str | None = None) -> str:
        """One headless call; Codex's last message."""
        with tempfile.TemporaryDirectory(prefix="middle-agent-") as tmp:
            cwd = Path(tmp) / "empty"
            cwd.mkdir()
            instructions = Path(tmp) / "instructions.md"
            instructions.write_text(system, encoding="utf-8")
            schema_file = None
            if schema is not None:
                schema_file = Path(tmp) / "schema.json"
                schema_file.write_text(json.dumps(_strict(schema)), encoding="utf-8")
            out, err, code = call_cli(self.command(str(cwd), instructions, schema_file, model), prompt, str(cwd),
                                      {**os.environ, **self.env}, self.timeout_s, "provider codex: Codex")
        text, usage, failure = _read(out)
        self.usage["requests"] += 1
        self.usage["input_tokens"] += int(usage.get("input_tokens") or 0)
        self.usage["output_tokens"] += int(usage.get("output_tokens") or 0)
        if failure is not None or (code != 0 and not text):
            raise self._failure((failure or err or out or f"exit code {code}").strip().replace("\n", " ")[-300:])
        return text



    def _failure(self, detail: str) -> AgentReplyError:
        """Codex's failure as one line: a refusal said as what to set, anything else to retry later."""
        from orchestrator.api_words import too_long

        match = _STATUS.search(detail)
        status = int(match[1]) if match else None
        words = _URL.sub("", detail).lower()
        if status in (401, 403) or any(w in words for w in _AUTH_WORDS):
            return ModelAccessError(f"provider codex: Codex cannot use a model ({detail}): {SIGN_IN}")
        if status == 404:
            return ModelAccessError(f"provider codex: model {self.model!r} was not found ({detail}): set [agent] "
                                    "model to one the server serves")
        if too_long(detail):
            return AgentReplyError(f"provider codex: the ticket's context is too long for model {self.model!r} "
                                   f"({detail}): set [agent] model to one with a longer context window, then "
                                   "`middle resume`")
        if status == 429 or (status or 0) >= 500 or "stream disconnected" in detail or "retry limit" in detail:
            return AgentReplyError(f"provider codex: Codex's call failed ({detail}); try again later with "
                                   "`middle resume`")
        return AgentReplyError(f"provider codex: Codex's call failed ({detail}); check `codex exec hello` works, "
                               "then `middle resume`")


class CodexTextLLM:
    """The cheaper memory tier (a TextLLM) through the Codex CLI."""

    def __init__(self, model: str, base: CodexLLM):
        self.model, self.base = model, base

    def complete(self, system: str, prompt: str, max_tokens: int = 1024) -> str:
        return self.base.run(system, prompt, model=self.model)


def _read(out: str) -> tuple[str, dict[str, Any], str | None]:
    """Codex's JSONL: its last agent message, the turn's usage, and a failure's message (or None)."""
    text, failure = "", None
    usage: dict[str, Any] = {}
    for line in out.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        raw_item = event.get("item")
        item: dict[str, Any] = raw_item if isinstance(raw_item, dict) else {}
        if kind == "item.completed" and item.get("type") == "agent_message":
            text = str(item.get("text") or "")
        elif kind == "turn.completed":
            # The turn ended well: an earlier "error" event was a notice of a retry that worked
            # ("Reconnecting... 1/5 (... 429 Too Many Requests)"), not the turn's failure.
            failure = None
            if isinstance(event.get("usage"), dict):
                usage = event["usage"]
        elif kind in ("turn.failed", "error"):
            error = event.get("error")
            failure = str(error.get("message") if isinstance(error, dict) else event.get("message") or kind)
    return text, usage, failure


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as OpenAI's strict structured output takes it: every object closed and every
    property required (an optional one may be null), `$defs` inlined references kept."""
    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: fix(v) for k, v in node.items() if k not in ("default", "title")}
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            return node
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node
    return fix(schema)
