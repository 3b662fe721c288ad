"""What a turn cost, for the coding agents whose CLI reports tokens but no money (Codex, Gemini),
or money only for the models it has prices for (aider, OpenCode).

Without a price their turns counted $0, so `[agent] max_cost_usd` and `[run] max_cost_usd_total`
never stopped them: the limits would have held only on Claude Code. aider and OpenCode report a
cost, but $0 for a model missing from their own price lists (a local or custom model, a model
newer than the CLI). Here a turn's tokens are priced by the model that ran them:
- `price` in the agent's options, when the user gives one (their contract, their discounts);
- else the published list price of that model (the tables below, USD per million tokens, as the
  providers listed them in 2025-2026; prices change, so `price` wins);
- else, a model not in the table (or the CLI's own choice, not named to us), the highest price
  in the agent's table, part by part: a spending limit should stop a run early, never late.
aider and OpenCode run any provider's model, so their table is every one below (`ANY_PRICES`); a
cost they report themselves is kept when no `price` is given, and never undercut (`counted_cost`).

A model served from a loopback or private address (the agent's base URL; a host name counts when
it is a `.local`/`.lan`/`.internal` one or resolves to such addresses only: local_host.py) may be
the user's own (ollama, llama.cpp, vLLM) and free, or a gateway to a paid API (a LiteLLM proxy on localhost:4000,
a company's gateway on 10.x): the address cannot tell which, so it is priced as above (a limit
stops such a run early, never late), and the run's start and `middle doctor` say once how to count
it at 0 (`price = {input = 0, output = 0}`). A model aider names through Ollama (litellm's `ollama/`,
`ollama_chat/`: local weights Ollama serves) counts 0 unless `price` is given. Each agent finds its
base URL (its options or the variables its CLI reads) and passes it here
(`price_for(base_url=...)`): one rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.coding_agent.local_host import Resolver, local_host

__all__ = ["ANY_PRICES", "CLAUDE_PRICES", "CODEX_PRICES", "FREE", "GEMINI_PRICES", "OLLAMA_PREFIXES", "TokenPrice",
           "counted_cost", "is_local", "local_note", "local_pricing", "price_for", "reported_or_priced", "turn_cost"]


class TokenPrice(BaseModel):
    """A model's price in USD per million tokens (`[coding_agents.<kind>] price`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(..., ge=0, description="USD per million input tokens (not read from cache).")
    output: float = Field(..., ge=0, description="USD per million output tokens (reasoning included).")
    cached_input: float | None = Field(None, ge=0, description=(
        "USD per million input tokens read from the provider's cache. Default: the input price."))


def _p(input: float, cached: float, output: float) -> TokenPrice:
    return TokenPrice(input=input, cached_input=cached, output=output)


# Longest prefix wins ("gpt-5-mini" before "gpt-5"). List prices at the standard tier.
CODEX_PRICES: dict[str, TokenPrice] = {
    "gpt-5": _p(1.25, 0.125, 10.0), "gpt-5-codex": _p(1.25, 0.125, 10.0),
    "gpt-5-mini": _p(0.25, 0.025, 2.0), "gpt-5-nano": _p(0.05, 0.005, 0.40),
    "gpt-4.1": _p(2.0, 0.50, 8.0), "gpt-4.1-mini": _p(0.40, 0.10, 1.60),
    "o3": _p(2.0, 0.50, 8.0), "o4-mini": _p(1.10, 0.275, 4.40),
}
GEMINI_PRICES: dict[str, TokenPrice] = {  # Gemini's prompts up to 200k tokens
    "gemini-2.5-pro": _p(1.25, 0.125, 10.0), "gemini-2.5-flash": _p(0.30, 0.03, 2.50),
    "gemini-2.5-flash-lite": _p(0.10, 0.01, 0.40), "gemini-3-pro": _p(2.0, 0.20, 12.0),
}
CLAUDE_PRICES: dict[str, TokenPrice] = {  # cache reads at a tenth of the input price
    "claude-opus-4": _p(15.0, 1.50, 75.0), "claude-opus-4-5": _p(5.0, 0.50, 25.0),
    "claude-sonnet-4": _p(3.0, 0.30, 15.0), "claude-3-7-sonnet": _p(3.0, 0.30, 15.0),
    "claude-3-5-sonnet": _p(3.0, 0.30, 15.0), "claude-haiku-4-5": _p(1.0, 0.10, 5.0),
    "claude-3-5-haiku": _p(0.80, 0.08, 4.0),
}
# aider and OpenCode drive any provider's model ("openai/gpt-4.1", "anthropic/claude-sonnet-4-5").
ANY_PRICES: dict[str, TokenPrice] = {**CLAUDE_PRICES, **CODEX_PRICES, **GEMINI_PRICES}


FREE = TokenPrice(input=0, output=0, cached_input=0)


def is_local(base_url: str | None, resolve: Resolver | None = None) -> bool:
    """Whether `base_url` names a host on the user's machine or network: a loopback, private or
    link-local address, localhost, a `.local`/`.lan`/`.internal`/`.home.arpa` name, or a name
    that resolves to such addresses only (local_host.py: looked up once, briefly)."""
    return local_host(base_url, resolve)[0]


def _ceiling(table: Mapping[str, TokenPrice]) -> TokenPrice:
    return TokenPrice(input=max(p.input for p in table.values()),
                      cached_input=max(p.cached_input or p.input for p in table.values()),
                      output=max(p.output for p in table.values()))


OLLAMA_PREFIXES = ("ollama/", "ollama_chat/")  # litellm's (aider's) names of models Ollama serves


def price_for(model: str | None, table: Mapping[str, TokenPrice],
              configured: TokenPrice | None = None, *, base_url: str | None = None,
              litellm_names: bool = False) -> tuple[TokenPrice, str]:
    """The price a turn of `model` (served at `base_url`, when the agent knows it) is counted at,
    and where it came from (for `middle doctor` and the run's start). `litellm_names`: the model is
    named as litellm routes it (aider), so `ollama/...` is a model Ollama serves. (OpenCode's
    `ollama/` is a provider id its user declared, which may point anywhere: not taken as free.)"""
    if configured is not None:
        return configured, "your price"
    if litellm_names and (model or "").strip().lower().startswith(OLLAMA_PREFIXES):
        return FREE, "0: a model Ollama serves; set price to count it"
    # The provider's part goes: "openai/gpt-4.1", "models/gemini-2.5-pro", "openrouter/anthropic/claude-...".
    name = (model or "").strip().lower().rsplit("/", 1)[-1]
    matches = [key for key in table if name == key or name.startswith(key + "-")]
    if matches:
        key = max(matches, key=len)
        price, why = table[key], f"the list price of {key}"
    else:
        what = f"{model} is not in the price table" if model else "the CLI chooses the model"
        price, why = _ceiling(table), f"the highest listed price ({what})"
    local, resolved = local_host(base_url)
    if local:  # the user's own free model, or a gateway to a paid one: they say which
        why += "; " + local_note(base_url, resolved)
    return price, why


def _count(usage: Mapping[str, Any], *keys: str) -> int:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, (int, float)) and value > 0:
            return int(value)
    return 0


def turn_cost(usage: Mapping[str, Any], price: TokenPrice) -> float:
    """USD for one turn's usage. Both CLIs count cached input inside their input total (OpenAI's
    and Gemini's own usage do), so the cached part is taken out of the input before pricing.
    Tokens in a `total_tokens` beyond input and output (Gemini's thoughts, which it bills as
    output) are counted as output."""
    total_in = _count(usage, "input_tokens")
    cached = min(_count(usage, "cached_input_tokens", "cache_read_input_tokens"), total_in)
    cached_price = price.input if price.cached_input is None else price.cached_input
    out = _count(usage, "output_tokens")
    out = max(out, _count(usage, "total_tokens") - total_in)
    return ((total_in - cached) * price.input + cached * cached_price + out * price.output) / 1_000_000


def counted_cost(reported: float, usage: Mapping[str, Any], price: TokenPrice, *, configured: bool) -> float:
    """What a turn of a CLI that prices some models itself (aider, OpenCode) counts for the limits.
    The CLI's own cost stands when it gave one and the user set no `price`: it knows the model it
    ran. When it gave none ($0: a model missing from its price list) the tokens are priced here;
    a `price` of the user's is applied always. Never less than the CLI reported."""
    if reported > 0 and not configured:
        return reported
    return max(reported, turn_cost(usage, price))


def local_note(base_url: str | None, resolved: str | None = None) -> str:
    """What is said of a model served at a local address (`middle doctor`'s row, the run's start);
    `resolved`: what its host name resolved to, when a lookup told it local ("gpu-box is 10.0.0.5")."""
    where = f"{base_url}; {resolved}" if resolved else base_url
    return f"served at a local address ({where}): if it costs nothing, set price = {{input = 0, output = 0}}"


def local_pricing(pricing: str) -> bool:
    """Whether an agent's `pricing()` line says its model is served at a local address."""
    return "served at a local address (" in pricing


def reported_or_priced(cli: str, model: str | None, configured: TokenPrice | None,
                       base_url: str | None = None, litellm_names: bool = False) -> str:
    """What `middle doctor` says such an agent's turns count at."""
    if configured is not None:
        return f"turns priced at your price, or what {cli} reports when more"
    why = price_for(model, ANY_PRICES, base_url=base_url, litellm_names=litellm_names)[1]
    return f"turns at {cli}'s own cost; a model it has no price for at {why}"
