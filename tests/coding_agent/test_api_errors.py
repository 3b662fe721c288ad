"""One reading of a model API's error for every coding agent: its kind from the HTTP status, or
from the words a CLI uses without one; the kinds that stop a batch. The agents' own words per
status are tested on their real CLIs (test_codex_agent, test_gemini_agent, test_opencode_agent,
test_aider_agent: `test_each_model_api_error_is_read_as_its_status_and_says_what_to_do`)."""

from __future__ import annotations

import pytest

from orchestrator.coding_agent.api_errors import (
    CONNECT,
    CONTEXT,
    KEY,
    MODEL,
    OTHER,
    QUOTA,
    RATE,
    SERVER,
    STOPS_BATCH,
    advice,
    kind_of,
    status_of,
)


@pytest.mark.parametrize("status, message, kind", [
    (401, "bad key", KEY), (403, "forbidden", KEY), (404, "Not found", MODEL),
    (400, "This model's maximum context length is 8192 tokens", CONTEXT), (413, "request too large", CONTEXT),
    (400, "Unsupported parameter: 'max_tokens'", OTHER), (422, "unprocessable", OTHER),
    (429, "Rate limit reached", RATE), (429, "You exceeded your current quota, check your plan and billing", QUOTA),
    (500, "boom", SERVER), (503, "overloaded", SERVER), (529, "Overloaded", SERVER),
    (None, "Codex ran out of room in the model's context window. Start a new thread", CONTEXT),
    (None, "Quota exceeded. Check your plan and billing details.", QUOTA),
    (None, "[API Error: Rate limit reached]\nPlease wait and try again later. To increase your limits, request a "
           "quota increase through AI Studio", RATE),
    (None, "The model `nope` does not exist", MODEL), (None, "ContextOverflowError: request too large", CONTEXT),
    (None, "[API Error: The model is overloaded.]", SERVER), (None, "exited with code 1", None), (None, None, None),
    (None, "Missing environment variable: `MY_KEY`.", KEY),
    (500, "InternalServerError: OpenAIException - Connection error.", CONNECT),
    (None, "APIConnectionError: Connection refused", CONNECT),
    (None, "Reconnecting... waiting for network (Connection failed: error sending request)", CONNECT),
])
def test_the_kind_of_an_error_from_its_status_or_its_words(status, message, kind):
    assert kind_of(status, message) == kind


def test_a_status_is_read_from_words_only_where_they_tell_it():
    assert status_of(None, "The model `nope` does not exist") == 404
    assert status_of(None, "Quota exceeded.") == status_of(None, "Please wait and try again later") == 429
    assert status_of(None, "ContextOverflowError: x") is None  # a 400 or a 413: not told
    assert status_of(502, "anything") == 502 and status_of(None, None) is None


def test_a_wrong_key_or_model_or_a_used_up_quota_stops_a_batch_and_says_what_to_set():
    assert STOPS_BATCH == {KEY, MODEL, QUOTA, CONNECT}
    assert advice(MODEL, "[coding_agents.codex]", "k") == (
        "The model was not found: set `[coding_agents.codex] model` to one the provider serves (or fix its base URL)")
    assert advice(KEY, "[coding_agents.codex]", "OPENAI_API_KEY") == "Check the API key (OPENAI_API_KEY)"
    assert "base URL" in advice(None, "[coding_agents.codex]", "k")
