"""`[agent] provider = "openai-compatible"`: the middle agent on any OpenAI Chat Completions server
(OpenAI, Ollama, vLLM, LM Studio, OpenRouter), through the `openai` package (the `openai` extra).

The decision stays structured: the reply is asked for with `response_format: json_schema` where
the server accepts it ("auto" falls back once, for good, when the server refuses it with a 400),
and every reply is checked against the schema; one that is not the JSON asked for is sent back
with what was wrong, at most `parse_retries` times (local models often wrap JSON in prose).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel

from orchestrator.agent.decision import parse_reply
from orchestrator.errors import AgentReplyError, ModelAccessError

log = logging.getLogger("middle.agent")

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
NO_KEY = "no-key"  # local servers (Ollama, vLLM, LM Studio) need none; the client needs a value

RETRY = ("That reply could not be used: {error}. Reply again with only one JSON object (no prose, no code "
         "fence) that matches this JSON schema:\n{schema}")


class OpenAICompatibleLLM:
    """A model on an OpenAI-compatible Chat Completions server, as the middle agent's AgentLLM."""

    def __init__(self, model: str, base_url: str, *, api_key: str | None = None, key_env: str = DEFAULT_KEY_ENV,
                 max_tokens: int = 2048, json_schema: Literal["auto", "always", "never"] = "auto",
                 parse_retries: int = 2, max_retries: int = 3, timeout_s: float = 300.0):
        import openai

        self.model, self.base_url, self.key_env = model, base_url, key_env
        self.max_tokens, self.json_schema, self.parse_retries = max_tokens, json_schema, parse_retries
        self.timeout_s = timeout_s
        self.use_schema = json_schema != "never"
        self.tokens_param = "max_tokens"  # what the server takes: learnt from its first refusal
        self.usage = {"input_tokens": 0, "output_tokens": 0, "requests": 0}
        from orchestrator.agent.api_errors import http_client

        self.client = openai.OpenAI(api_key=api_key or NO_KEY, base_url=base_url, max_retries=max_retries,
                                    timeout=timeout_s, http_client=http_client(openai))

    @classmethod
    def from_config(cls, cfg: Any, *, max_retries: int = 3) -> "OpenAICompatibleLLM":
        key_env = cfg.api_key_env or DEFAULT_KEY_ENV
        key = os.environ.get(key_env) or None
        if cfg.api_key_env and not key:  # a variable named on purpose must be there
            raise ModelAccessError(f"provider openai-compatible: {key_env} is not set: export it with the "
                                   f"server's API key (or remove [agent] api_key_env for a server that needs none)")
        assert cfg.base_url  # AgentConfig requires it for this provider
        return cls(cfg.model, cfg.base_url, api_key=key, key_env=key_env, max_tokens=cfg.max_tokens,
                   json_schema=cfg.json_schema, parse_retries=cfg.parse_retries, max_retries=max_retries,
                   timeout_s=cfg.timeout_s)

    # -- AgentLLM ------------------------------------------------------------------------------
    def complete(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel]) -> str:
        chat = [{"role": "system", "content": system}, *messages]
        text = ""
        for attempt in range(self.parse_retries + 1):
            text = self.chat(chat, schema=schema)
            try:
                parse_reply(text, schema)
                return text
            except ValueError as exc:
                if attempt == self.parse_retries:
                    break  # the middle agent's own repair, then its one error line, take it from here
                log.warning("openai-compatible reply unusable (%s); asking again (%d of %d)", exc, attempt + 1,
                            self.parse_retries)
                chat += [{"role": "assistant", "content": text or "(empty reply)"},
                         {"role": "user", "content": RETRY.format(error=exc, schema=schema_text(schema))}]
        return text

    def ping(self) -> str:
        """One tiny call (`middle doctor`)."""
        return self.chat([{"role": "user", "content": "Reply with: ok"}], max_tokens=16)

    def where(self) -> str:
        key = f"key from {self.key_env}" if self.client.api_key != NO_KEY else "no key"
        return f"{self.base_url} ({key})"

    def text_llm(self, model: str) -> "OpenAITextLLM":
        """The memory tier (`[memory] llm_model`) on the same server."""
        return OpenAITextLLM(model, self)

    # -- one request ---------------------------------------------------------------------------
    def chat(self, messages: list[dict[str, str]], *, schema: type[BaseModel] | None = None,
             model: str | None = None, max_tokens: int | None = None) -> str:
        kwargs: dict[str, Any] = {"model": model or self.model, "messages": messages,
                                  self.tokens_param: max_tokens or self.max_tokens}
        if schema is not None and self.use_schema:
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                "name": schema.__name__, "schema": schema.model_json_schema()}}
        for _ in range(3):  # at most: the tokens parameter renamed, then the schema dropped
            try:
                resp = self._create(**kwargs)
                break
            except _TokensParamRefused:
                # OpenAI's reasoning models take only max_completion_tokens; older servers only max_tokens.
                self.tokens_param = "max_completion_tokens"
                kwargs["max_completion_tokens"] = kwargs.pop("max_tokens")
            except _SchemaRefused:
                log.warning("the server at %s refused response_format json_schema; checking plain replies "
                            "instead", self.base_url)
                self.use_schema = False
                kwargs.pop("response_format")
        else:  # unreachable: the third request either answers or raises
            raise AgentReplyError(f"provider openai-compatible: the server at {self.base_url} refused every request")
        self._count(resp)
        choices = getattr(resp, "choices", None) or []
        content = choices[0].message.content if choices else None
        return content or ""

    def _create(self, **kwargs: Any) -> Any:
        import openai

        from orchestrator.agent import api_errors

        where = f"provider openai-compatible: the server at {self.base_url}"
        retries = self.client.max_retries
        try:
            return self.client.chat.completions.create(**kwargs)
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise ModelAccessError(f"{where} rejected the API key ({exc.status_code}): set {self.key_env} "
                                   "(or [agent] api_key_env to the variable that holds it)") from None
        except openai.NotFoundError as exc:
            if urlsplit(self.base_url).path.rstrip("/") == "":
                # Ollama, vLLM, LM Studio and OpenAI serve the API under /v1: a bare host 404s
                raise ModelAccessError(f"{where} has no {self.base_url.rstrip('/')}/chat/completions (404): set "
                                       f"[agent] base_url = \"{self.base_url.rstrip('/')}/v1\" (the API's address, "
                                       "with its /v1)") from None
            raise ModelAccessError(f"{where}: model {kwargs['model']!r} was not found ({exc.status_code}: "
                                   f"{_message(exc)}): set [agent] model to one it serves (and [agent] base_url "
                                   "to the API's address, often ending in /v1)") from None
        except openai.APITimeoutError:
            raise api_errors.timed_out(where, self.timeout_s, retries) from None
        except openai.APIConnectionError as exc:
            cut = api_errors.cut_off(where, exc.__cause__, retries)
            if cut is not None:
                raise cut from None
            raise ModelAccessError(f"cannot reach {where} ({exc}): check [agent] base_url and that the "
                                   "server is running") from None
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            said = _message(exc)
            if "max_tokens" in kwargs and "max_completion_tokens" in said:
                raise _TokensParamRefused() from None
            # (a context too long is refused with or without the schema: said as it is)
            if "response_format" in kwargs and self.json_schema == "auto" and not api_errors.too_long(said):
                raise _SchemaRefused() from None
            raise api_errors.refused(where, exc.status_code, said, str(kwargs["model"]),
                                     "check [agent] model and json_schema") from None
        except openai.APIStatusError as exc:
            raise api_errors.gave_up(where, exc.status_code, _message(exc), retries, exc.response.headers) from None
        except json.JSONDecodeError as exc:
            raise api_errors.unreadable(where, exc, "[agent] base_url") from None

    def _count(self, resp: Any) -> None:
        self.usage["requests"] += 1
        usage = getattr(resp, "usage", None)
        if usage is not None:
            self.usage["input_tokens"] += getattr(usage, "prompt_tokens", 0) or 0
            self.usage["output_tokens"] += getattr(usage, "completion_tokens", 0) or 0


class OpenAITextLLM:
    """The cheaper memory tier (a TextLLM) on the same OpenAI-compatible server."""

    def __init__(self, model: str, base: OpenAICompatibleLLM):
        self.model, self.base = model, base

    def complete(self, system: str, prompt: str, max_tokens: int = 1024) -> str:
        return self.base.chat([{"role": "system", "content": system}, {"role": "user", "content": prompt}],
                              model=self.model, max_tokens=max_tokens)


class _TokensParamRefused(Exception):
    """The server wants max_completion_tokens instead of max_tokens (OpenAI's reasoning models)."""


class _SchemaRefused(Exception):
    """The server answered 400/422 to a request asking for a JSON-schema reply."""


def schema_text(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_json_schema(), separators=(",", ":"))


def _message(exc: Any) -> str:
    from orchestrator.agent.api_errors import said

    return said(exc)
