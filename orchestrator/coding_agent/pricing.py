"""What a turn cost, for the coding agents whose CLI reports tokens but no money (Codex, Gemini).

Without a price their turns counted $0, so `[agent] max_cost_usd` and `[run] max_cost_usd_total`
never stopped them: the limits would have held only on Claude Code, aider and OpenCode, which
report their own cost. Here a turn's tokens are priced by the model that ran them:
- `price` in the agent's options, when the user gives one (their contract, their discounts);
- else the published list price of that model (the tables below, USD per million tokens, as the
  providers listed them in 2025-2026; prices change, so `price` wins);
- else, a model not in the table (or the CLI's own choice, not named to us), the highest price
  in the agent's table, part by part: a spending limit should stop a run early, never late.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CODEX_PRICES", "GEMINI_PRICES", "TokenPrice", "price_for", "turn_cost"]


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


def _ceiling(table: Mapping[str, TokenPrice]) -> TokenPrice:
    return TokenPrice(input=max(p.input for p in table.values()),
                      cached_input=max(p.cached_input or p.input for p in table.values()),
                      output=max(p.output for p in table.values()))


def price_for(model: str | None, table: Mapping[str, TokenPrice],
              configured: TokenPrice | None = None) -> tuple[TokenPrice, str]:
    """The price a turn of `model` is counted at, and where it came from (for `middle agents`)."""
    if configured is not None:
        return configured, "your price"
    name = (model or "").strip().lower().removeprefix("models/")
    matches = [key for key in table if name == key or name.startswith(key + "-")]
    if matches:
        key = max(matches, key=len)
        return table[key], f"the list price of {key}"
    why = f"{model} is not in the price table" if model else "the CLI chooses the model"
    return _ceiling(table), f"the highest listed price ({why})"


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
