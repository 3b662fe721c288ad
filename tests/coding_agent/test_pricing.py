"""Pricing the turns of the coding agents whose CLI reports tokens and no money (Codex, Gemini), or
money only for the models it has a price for (aider, OpenCode)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.coding_agent.aider import AiderAgent, AiderOptions
from orchestrator.coding_agent.aider_output import AiderOutput
from orchestrator.coding_agent.codex import CodexOptions
from orchestrator.coding_agent.gemini import GeminiOptions
from orchestrator.coding_agent.opencode import OpenCodeAgent, OpenCodeOptions
from orchestrator.coding_agent.opencode_events import OpenCodeStream
from orchestrator.coding_agent.pricing import (
    ANY_PRICES,
    CLAUDE_PRICES,
    CODEX_PRICES,
    GEMINI_PRICES,
    TokenPrice,
    counted_cost,
    price_for,
    turn_cost,
)

CEILING = price_for("no-such-model", ANY_PRICES)[0]  # the highest price listed for any provider


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


def test_a_provider_prefix_names_the_same_model_for_aider_and_opencode():
    assert price_for("anthropic/claude-sonnet-4-5-20250929", ANY_PRICES)[0] == CLAUDE_PRICES["claude-sonnet-4"]
    assert price_for("openrouter/anthropic/claude-opus-4-5", ANY_PRICES)[0] == CLAUDE_PRICES["claude-opus-4-5"]
    assert price_for("openai/gpt-4.1-mini", ANY_PRICES)[0] == CODEX_PRICES["gpt-4.1-mini"]
    assert price_for("google/gemini-2.5-pro", ANY_PRICES)[0] == GEMINI_PRICES["gemini-2.5-pro"]
    assert CEILING == TokenPrice(input=15.0, cached_input=1.5, output=75.0)  # claude-opus-4's


def test_a_cost_the_cli_reported_stands_and_a_missing_one_is_priced():
    usage = {"input_tokens": 1_000_000, "output_tokens": 100_000}
    price = TokenPrice(input=1.0, output=10.0)
    assert counted_cost(0.5, usage, price, configured=False) == 0.5  # the CLI knew the model
    assert counted_cost(0.0, usage, price, configured=False) == pytest.approx(2.0)  # it did not: priced
    assert counted_cost(0.5, usage, price, configured=True) == pytest.approx(2.0)  # the user's price
    assert counted_cost(3.0, usage, price, configured=True) == 3.0  # never less than the CLI says
    assert counted_cost(0.0, {}, price, configured=False) == 0.0


def aider_turn(model_line: str, tokens_line: str) -> AiderOutput:
    out = AiderOutput(cwd=Path("/p"))
    for line in ["Aider v0.86.2", model_line, "Git repo: .git with 3 files", "Repo-map: disabled", "",
                 "Done.", tokens_line]:
        out.feed(line + "\n")
    return out


def test_an_aider_turn_of_a_model_aider_has_no_price_for_is_priced_by_its_tokens():
    # No "Cost:" part: aider prints none for a model without prices (a local one, a new name).
    out = aider_turn("Model: openai/my-local-model with whole edit format", "Tokens: 1.0k sent, 200 received.")
    assert out.model == "openai/my-local-model" and out.cost_usd == 0.0
    assert AiderAgent()._cost(out) == pytest.approx((1000 * CEILING.input + 200 * CEILING.output) / 1e6)
    mine = AiderAgent(AiderOptions(price={"input": 1.0, "output": 2.0}))
    assert mine._cost(out) == pytest.approx((1000 * 1.0 + 200 * 2.0) / 1e6)
    # The model aider names in its banner (an alias resolved) is the one priced.
    out = aider_turn("Main model: anthropic/claude-3-5-haiku-20241022 with diff edit format",
                     "Tokens: 1.0k sent, 200 received.")
    haiku = CLAUDE_PRICES["claude-3-5-haiku"]
    assert AiderAgent(AiderOptions(model="haiku"))._cost(out) == pytest.approx(
        (1000 * haiku.input + 200 * haiku.output) / 1e6)


def test_an_aider_turn_aider_priced_keeps_its_cost_and_cache_counts_are_never_undercounted():
    out = aider_turn("Model: openai/x with whole edit format",
                     "Tokens: 1.0k sent, 2.0k cache write, 3.0k cache hit, 100 received. "
                     "Cost: $0.0123 message, $0.0123 session.")
    assert AiderAgent()._cost(out) == 0.0123
    assert out.priced_usage() == {"input_tokens": 6000, "cached_input_tokens": 3000, "output_tokens": 100}


def opencode_turn(cost: float) -> OpenCodeStream:
    stream = OpenCodeStream()
    stream.feed(json.dumps({"type": "step_finish", "sessionID": "ses_1", "part": {
        "reason": "stop", "cost": cost,
        "tokens": {"input": 1000, "output": 150, "reasoning": 50, "cache": {"read": 4000, "write": 0}}}}))
    return stream


def test_an_opencode_turn_of_a_model_without_a_price_is_priced_by_its_tokens():
    stream = opencode_turn(0)  # part.cost 0: a model OpenCode's config and models.dev give no price
    assert stream.priced_usage() == {"input_tokens": 5000, "cached_input_tokens": 4000, "output_tokens": 200}
    expected = (1000 * CEILING.input + 4000 * (CEILING.cached_input or 0) + 200 * CEILING.output) / 1e6
    assert OpenCodeAgent(OpenCodeOptions(model="ollama/qwen3-coder"))._cost(stream) == pytest.approx(expected)
    sonnet = CLAUDE_PRICES["claude-sonnet-4"]
    assert OpenCodeAgent(OpenCodeOptions(model="anthropic/claude-sonnet-4-5"))._cost(stream) == pytest.approx(
        (1000 * sonnet.input + 4000 * (sonnet.cached_input or 0) + 200 * sonnet.output) / 1e6)
    assert OpenCodeAgent(OpenCodeOptions(model="x/y"))._cost(opencode_turn(0.25)) == 0.25  # its own cost


def test_doctor_says_what_aider_and_opencode_turns_count_at():
    assert AiderAgent.pricing(AiderOptions()) == (
        "turns at aider's own cost; a model it has no price for at the highest listed price (the CLI "
        "chooses the model)")
    assert "the list price of gpt-4.1" in OpenCodeAgent.pricing(OpenCodeOptions(model="openai/gpt-4.1"))
    assert OpenCodeAgent.pricing(OpenCodeOptions(price={"input": 0, "output": 0})) == (
        "turns priced at your price, or what OpenCode reports when more")
