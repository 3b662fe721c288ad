"""What a model API's error means, whichever coding agent's CLI met it: one kind per HTTP status
(and the few errors a CLI words without its status), and what the user should do about it.

The kinds are middle's own: KEY (401, 403, or a key the CLI found missing), MODEL (404: no such
model, or a base URL without the API's path), QUOTA (429 for an account whose quota is used up)
and CONNECT (nothing answered at the base URL) stop a batch, as every other
ticket would fail the same way (graph.nodes raises ModelAccessError); CONTEXT (413, or a 400 that
says the context is too long), RATE (429), SERVER (5xx) and OTHER (any other 400) fail the ticket,
resumable (`middle resume` retries the turn; a worker retries a failed turn by itself).
docs/coding-agent.md has the table of what each agent's CLI prints and what the user sees.
"""

from __future__ import annotations

import re

from orchestrator.api_words import too_long

__all__ = ["CONNECT", "CONTEXT", "KEY", "MODEL", "OTHER", "QUOTA", "RATE", "SERVER", "STOPS_BATCH", "advice",
           "kind_of", "status_of"]

KEY, MODEL, QUOTA, CONTEXT, RATE, SERVER, OTHER = "key", "model", "quota", "context", "rate", "server", "other"
CONNECT = "connect"  # no answer at all: the base URL is wrong, or the network is down
STOPS_BATCH = frozenset({KEY, MODEL, QUOTA, CONNECT})

# A key the CLI found missing or refused before any status (Codex: "Missing environment variable:
# `MY_KEY`"), and a server it could not reach (Codex: "error sending request", "failed to lookup
# address"; litellm: APIConnectionError): said without a status, they stop a batch too.
_KEY_RE = re.compile(r"missing environment variable|incorrect api key|invalid[ _]api[ _]key|no api key"
                     r"|api key (?:is )?(?:not set|missing)|not logged in|not signed in|AuthenticationError",
                     re.IGNORECASE)
_CONNECT_RE = re.compile(r"error sending request|failed to lookup address|name does not resolve|connection refused"
                         r"|could not connect|cannot connect|ECONNREFUSED|APIConnectionError|fetch failed"
                         r"|Unable to connect|Connection error", re.IGNORECASE)

# (not Gemini's "Please wait and try again later. To increase your limits, request a quota increase":
# a rate limit)
_QUOTA_RE = re.compile(r"quota exceeded|exceeded your current quota|insufficient_quota|plan and billing"
                       r"|insufficient[ _]funds|credit balance", re.IGNORECASE)
_RATE_RE = re.compile(r"rate limit|too many requests|resource_exhausted|please wait and try again later",
                      re.IGNORECASE)
_SERVER_RE = re.compile(r"overloaded|service unavailable|internal server error|high demand", re.IGNORECASE)
_MODEL_RE = re.compile(r"model\b[^.]{0,80}\b(?:does not exist|not found|is not supported|unknown)|model_not_found"
                       r"|unknown model|no such model", re.IGNORECASE)


def kind_of(status: int | None, message: str | None = None) -> str | None:
    """The kind of a model API error with this HTTP status and message; None: no API error seen.
    Without a status, the words a CLI uses for one (Codex: "Codex ran out of room in the model's
    context window", "Quota exceeded"; Gemini: "Please wait and try again later", a body's message
    alone for a 404 or 503; OpenCode: "ContextOverflowError")."""
    text = message or ""
    if status in (401, 403) or (status is None and _KEY_RE.search(text)):
        return KEY
    if status == 404 or (status is None and _MODEL_RE.search(text)):
        return MODEL
    if status == 413 or (status in (400, None) and too_long(text)):
        return CONTEXT
    if status in (402, 429, None) and _QUOTA_RE.search(text):
        return QUOTA
    if status == 429 or (status is None and _RATE_RE.search(text)):
        return RATE
    # (litellm words a server it could not reach as InternalServerError "Connection error": a 500)
    if (status is None or status >= 500) and _CONNECT_RE.search(text):
        return CONNECT
    if (status or 0) >= 500 or (status is None and _SERVER_RE.search(text)):
        return SERVER
    return OTHER if status is not None else None


def status_of(status: int | None, message: str | None) -> int | None:
    """The HTTP status of an error, also when the CLI words it without one and the words tell it:
    a quota or a rate limit 429, a model that does not exist 404 (Codex and Gemini pass the body's
    message alone for OpenAI's model_not_found). A context too long may be a 400 or a 413, an
    overloaded server any 5xx: those stay without one (their kind still says what to do)."""
    if status is not None or not message:
        return status
    return {QUOTA: 429, RATE: 429, MODEL: 404}.get(kind_of(None, message) or "")


def advice(kind: str | None, table: str, key: str) -> str:
    """What to do, for an error of `kind` met by the agent of options table `table` whose
    credentials are `key` (e.g. "the provider's env_key, or `codex login`"); no final period."""
    return {
        KEY: f"Check the API key ({key})",
        MODEL: f"The model was not found: set `{table} model` to one the provider serves (or fix its base URL)",
        QUOTA: "The account's quota is used up: check the provider's plan and billing",
        CONTEXT: "The conversation is longer than the model's context window: use a model with a larger one, "
                 "or split the ticket",
        RATE: "Wait for the provider's rate limit, or lower [run] parallel",
        SERVER: "The model API's server failed: wait and check the provider's status",
        CONNECT: "Nothing answered at the model API's address: check the provider's base URL and the network",
    }.get(kind or OTHER, f"Check the provider's base URL, `{table} model` and the provider's status")
