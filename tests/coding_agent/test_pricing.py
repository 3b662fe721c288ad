"""Pricing the turns of the coding agents whose CLI reports tokens and no money (Codex, Gemini)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from orchestrator.coding_agent.codex import CodexOptions
from orchestrator.coding_agent.gemini import GeminiOptions
from orchestrator.coding_agent.pricing import CODEX_PRICES, GEMINI_PRICES, TokenPrice, price_for, turn_cost


def test_the_longest_listed_prefix_prices_a_model():
    assert price_for("gpt-5-mini", CODEX_PRICES)[0] == CODEX_PRICES["gpt-5-mini"]
    assert price_for("gpt-5-mini-2025-08-07", CODEX_PRICES)[0] == CODEX_PRICES["gpt-5-mini"]
    assert price_for("gpt-5", CODEX_PRICES) == (CODEX_PRICES["gpt-5"], "the list price of gpt-5")
    assert price_for("models/gemini-2.5-flash-lite", GEMINI_PRICES)[0] == GEMINI_PRICES["gemini-2.5-flash-lite"]
    assert price_for("gpt-50", CODEX_PRICES)[1].startswith("the highest listed price")  # not gpt-5


@pytest.mark.parametrize("model", [None, "some-new-model"])
def test_a_model_not_listed_is_counted_at_the_highest_price_so_a_limit_stops_early(model):
    price, why = price_for(model, CODEX_PRICES)
    assert price.input == max(p.input for p in CODEX_PRICES.values())
    assert price.output == max(p.output for p in CODEX_PRICES.values())
    assert why.startswith("the highest listed price")


def test_the_users_price_wins():
    mine = TokenPrice(input=0.1, output=0.2)
    assert price_for("gpt-5", CODEX_PRICES, mine) == (mine, "your price")
    assert CodexOptions(price={"input": 0.1, "output": 0.2}).price == mine
    assert GeminiOptions(price={"input": 0.1, "output": 0.2}).price == mine


def test_a_price_is_strict():
    with pytest.raises(ValidationError):
        CodexOptions(price={"input": -1, "output": 1})
    with pytest.raises(ValidationError):
        GeminiOptions(price={"input": 1, "output": 1, "per": "token"})


def test_cached_input_is_taken_out_of_the_input_and_thoughts_count_as_output():
    price = TokenPrice(input=2.0, cached_input=0.5, output=8.0)
    codex = {"input_tokens": 1_000_000, "cached_input_tokens": 400_000, "output_tokens": 100_000}
    assert turn_cost(codex, price) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.1 * 8.0)
    gemini = {"input_tokens": 1_000_000, "cache_read_input_tokens": 400_000, "output_tokens": 100_000,
              "total_tokens": 1_300_000}  # 200,000 thought tokens, billed as output
    assert turn_cost(gemini, price) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.3 * 8.0)
    assert turn_cost({}, price) == 0.0
    assert turn_cost({"input_tokens": 10, "output_tokens": 0}, TokenPrice(input=1.0, output=1.0)) == pytest.approx(1e-5)
