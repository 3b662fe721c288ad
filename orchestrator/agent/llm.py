"""LLM adapters: the anthropic SDK (default, structured output; also Bedrock and Vertex through its own
clients, see agent.providers) and any LangChain chat model."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from orchestrator.errors import ConfigError, ModelAccessError

log = logging.getLogger("middle.agent")


class AgentLLM(Protocol):
    """What the middle agent needs from a model: a text reply, asked to follow a JSON schema."""

    def complete(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel]) -> str:
        """Return the reply text for `messages` ([{"role": "user"|"assistant", "content": str}])."""


class ProviderLLM(AgentLLM, Protocol):
    """An `[agent] provider`'s model (agent.providers): also a tiny call and its endpoint, for `middle doctor`."""

    def ping(self) -> str:
        """One tiny call; the reply's text."""

    def where(self) -> str:
        """The endpoint (or executable) it calls."""


@dataclass(frozen=True)
class Access:
    """How an anthropic-SDK client reaches its model, for error lines that say what to set."""

    api: str = "the Messages API"
    credential: str = "API key"
    credential_hint: str = "check ANTHROPIC_API_KEY"
    endpoint_hint: str = "ANTHROPIC_BASE_URL"
    errors: tuple[type[BaseException], ...] = ()  # a cloud SDK's errors for missing credentials
    source: str = "ANTHROPIC_API_KEY"  # where the credentials were found, for `middle doctor`


class AnthropicLLM:
    """Claude through the `anthropic` SDK with structured output (`output_config` JSON schema).

    The SDK retries transient errors (connection, 408/409/429/5xx) with backoff; what is left
    after its retries becomes one clear AgentReplyError or ConfigError.
    """

    def __init__(
        self,
        model: str,
        max_tokens: int = 2048,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 3,
        timeout_s: float = 300.0,
        client: Any = None,
        access: "Access | None" = None,
    ):
        import anthropic

        self.access = access or Access()
        self.timeout_s = timeout_s  # for the line a timeout gives (a given client has its own, the same)
        self.structured = True  # output_config sent; False once the API refused it (see complete)
        self.model = model
        self.max_tokens = max_tokens
        self.usage = {"input_tokens": 0, "output_tokens": 0, "requests": 0}
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if client is None and not key:
            raise ConfigError(
                "ANTHROPIC_API_KEY is not set: export it to use Claude as the middle agent, "
                "or run `middle demo` / `middle run --fake` to use the built-in offline fake model"
            )
        from orchestrator.agent.api_errors import http_client

        self.client = client or anthropic.Anthropic(
            api_key=key, http_client=http_client(anthropic),
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
            max_retries=max_retries,
            timeout=timeout_s,
        )

    def _create(self, **kwargs: Any):
        import json

        import anthropic

        from orchestrator.agent import api_errors

        a = self.access
        retries = self.client.max_retries
        try:
            return self.client.messages.create(model=self.model, **kwargs)
        except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as exc:
            raise ModelAccessError(
                f"{a.api} rejected the {a.credential} ({exc.status_code}): {a.credential_hint}") from None
        except anthropic.NotFoundError as exc:
            raise ModelAccessError(
                f"{a.api}: model {self.model!r} was not found ({api_errors.said(exc)}): set [agent] model in "
                "middle.toml") from None
        except anthropic.BadRequestError as exc:
            if "output_config" in kwargs and "output_config" in str(exc.message):
                raise _StructuredRefused() from None
            raise api_errors.refused(a.api, 400, api_errors.said(exc), self.model,
                                     "check [agent] model and max_tokens") from None
        except anthropic.APITimeoutError:
            # (before APIConnectionError, its base: the API was reached but did not answer in time)
            raise api_errors.timed_out(a.api, self.timeout_s, retries) from None
        except anthropic.APIConnectionError as exc:
            cut = api_errors.cut_off(a.api, exc.__cause__, retries)
            if cut is not None:
                raise cut from None
            raise ModelAccessError(
                f"cannot reach {a.api} at {self.client.base_url} ({exc}): check the network or {a.endpoint_hint}"
            ) from None
        except anthropic.APIStatusError as exc:
            raise api_errors.gave_up(a.api, exc.status_code, api_errors.said(exc), retries,
                                     exc.response.headers) from None
        except json.JSONDecodeError as exc:
            raise api_errors.unreadable(a.api, exc, a.endpoint_hint) from None
        except a.errors as exc:
            # The cloud clients resolve credentials when a request is signed (boto3's chain,
            # Google's ADC) and raise their own errors when they find none or it is refused.
            raise ModelAccessError(f"{a.api}: {a.credential} could not be used ({exc}): {a.credential_hint}") from None

    def complete(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel]) -> str:
        import anthropic

        kwargs: dict[str, Any] = {"max_tokens": self.max_tokens, "system": system, "messages": messages}
        if self.structured:
            kwargs["output_config"] = {"format": {"type": "json_schema",
                                                  "schema": anthropic.transform_schema(schema)}}
        try:
            resp = self._create(**kwargs)
        except _StructuredRefused:
            # A cloud region or a gateway without structured output: the reply is checked and
            # repaired by the middle agent instead, for the rest of this run.
            log.warning("%s refused structured output (output_config); checking plain replies instead", self.access.api)
            self.structured = False
            kwargs.pop("output_config")
            resp = self._create(**kwargs)
        self._count(resp)
        return "".join(b.text for b in resp.content if getattr(b, "type", "") == "text")

    def ping(self) -> str:
        """One tiny call (`middle doctor`): the reply's text; ModelAccessError when it cannot be made."""
        resp = self._create(max_tokens=16, messages=[{"role": "user", "content": "Reply with: ok"}])
        return "".join(getattr(b, "text", "") for b in resp.content)

    def where(self) -> str:
        """The endpoint this client calls and where its credentials come from, for `middle doctor`."""
        return f"{self.client.base_url} ({self.access.source})"

    def _count(self, resp: Any) -> None:
        usage = getattr(resp, "usage", None)
        self.usage["requests"] += 1
        if usage is not None:
            self.usage["input_tokens"] += getattr(usage, "input_tokens", 0) or 0
            self.usage["output_tokens"] += getattr(usage, "output_tokens", 0) or 0


class _StructuredRefused(Exception):
    """The API answered 400 naming output_config: it has no structured output."""


class AnthropicTextLLM:
    """The cheaper model tier memory backends use (a TextLLM), sharing an AnthropicLLM's client."""

    def __init__(self, model: str, base: AnthropicLLM):
        self.model, self.base = model, base

    def complete(self, system: str, prompt: str, max_tokens: int = 1024) -> str:
        from anthropic.types import TextBlock

        resp = self.base.client.messages.create(
            model=self.model, max_tokens=max_tokens, system=system,
            messages=[{"role": "user", "content": prompt}],
        )
        return "".join(b.text for b in resp.content if isinstance(b, TextBlock))


class LangChainLLM:
    """Any LangChain `BaseChatModel` (Ollama, OpenAI, ...) as the middle agent's model."""

    def __init__(self, chat_model: Any):
        self.chat_model = chat_model

    def complete(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel]) -> str:
        from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

        lc: list[BaseMessage] = [SystemMessage(content=system)]
        for m in messages:
            lc.append(HumanMessage(content=m["content"]) if m["role"] == "user" else AIMessage(content=m["content"]))
        reply = self.chat_model.invoke(lc)
        content = reply.content
        if isinstance(content, list):  # content blocks
            content = "".join(c.get("text", "") if isinstance(c, dict) else str(c) for c in content)
        return str(content)


def as_agent_llm(model: Any) -> AgentLLM:
    """Accept an AgentLLM as is, or wrap a LangChain BaseChatModel."""
    if hasattr(model, "complete"):
        return model
    from langchain_core.language_models import BaseChatModel  # a dependency: always there

    if isinstance(model, BaseChatModel):
        return LangChainLLM(model)
    raise ConfigError(
        f"{type(model).__name__} is not a usable model: pass a LangChain BaseChatModel or an "
        "object with complete(system, messages, schema) -> str"
    )
