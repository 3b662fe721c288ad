"""The error lines the HTTP providers (the anthropic SDK's clients and openai-compatible) share for
what is left after their SDK's retries: each names the provider and says what to do.

Both SDKs retry connection errors, timeouts, 408/409/429/5xx (waiting what `retry-after` says
when it is under a minute, else backing off) up to `max_retries` times; a refusal (400, 401, 403,
404) is never retried. What they raise past that is turned into one AgentReplyError (the ticket
fails, resumable) or ModelAccessError (the model cannot be used: the batch stops) here.
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

from orchestrator.api_words import too_long
from orchestrator.errors import AgentReplyError

# The longest `retry-after` waited for. The anthropic SDK waits whatever the header says (a rate
# limit answering "retry-after: 3600" held a run silent for an hour, per retry); OpenAI's waits
# at most a minute, then backs off and asks again. Past this, neither retries: the line says
# how long the API asked to wait, for a `middle resume` then.
MAX_WAIT_S = 60.0


def http_client(sdk: Any) -> Any:
    """The SDK's own default HTTP client (`sdk` is the anthropic or openai module), with a hook
    that turns a `retry-after` longer than MAX_WAIT_S into `x-should-retry: false`, a header
    both SDKs obey before their own rule."""
    return sdk.DefaultHttpxClient(event_hooks={"response": [_no_long_waits]})


def _no_long_waits(response: Any) -> None:
    wait = retry_after(response.headers)
    if wait is not None and wait > MAX_WAIT_S:
        response.headers["x-should-retry"] = "false"


def retry_after(headers: Any) -> float | None:
    """The wait a response asks for, in seconds (`retry-after-ms`, `retry-after` in seconds or as
    an HTTP date), or None."""
    if headers is None:
        return None
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return float(value)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return when.timestamp() - time.time()
    except (TypeError, ValueError, IndexError):
        return None


def said(exc: Any) -> str:
    """What the API said, without the SDK's "Error code: N - {...}" wrapping."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:200]
        if isinstance(error, str):
            return error[:200]
    return str(getattr(exc, "message", exc))[:200]


def refused(who: str, status: int, message: str, model: str, hint: str) -> AgentReplyError:
    """A 400/422: final, never retried (the same request would be refused again)."""
    if too_long(message):
        return AgentReplyError(f"{who} refused the request ({status}: {message}): the ticket's context is too long "
                               f"for model {model!r}: set [agent] model to one with a longer context window, "
                               "then `middle resume`")
    return AgentReplyError(f"{who} refused the request ({status}: {message}); {hint}")


def gave_up(who: str, status: int, message: str, retries: int, headers: Any = None) -> AgentReplyError:
    """A transient answer (408, 429, 5xx, 529 overloaded) still there after the SDK's retries, or
    one asking to wait longer than MAX_WAIT_S (not retried)."""
    wait = retry_after(headers)
    if wait is not None and wait > MAX_WAIT_S:
        return AgentReplyError(f"{who} answered {status} ({message}) and asks to wait {wait:.0f} s: try again "
                               "after that with `middle resume`")
    tried = f" after {retries} retries" if retries else ""  # (`middle doctor` asks once)
    return AgentReplyError(f"{who} answered {status}{tried} ({message}); try again later with `middle resume`")


def timed_out(who: str, timeout_s: float, retries: int) -> AgentReplyError:
    return AgentReplyError(f"{who} did not answer within {timeout_s:g} s (tried {retries + 1} times): try again "
                           "with `middle resume`, or raise [agent] timeout_s for a slow model")


def cut_off(who: str, cause: BaseException | None, retries: int) -> AgentReplyError | None:
    """The connection closed mid-reply (the server or a proxy died): the server was reached, so
    not a ModelAccessError. None when `cause` is not that (a refused or unresolvable address)."""
    # (by name: the SDKs' HTTP library is httpx, or its fork httpx2 in the anthropic and openai
    # SDKs of 2026, whose classes are not httpx's)
    if type(cause).__name__ in ("RemoteProtocolError", "ReadError"):
        return AgentReplyError(f"{who}'s reply was cut off ({cause}; tried {retries + 1} times): try again with "
                               "`middle resume`")
    return None


def unreadable(who: str, exc: ValueError, endpoint_hint: str) -> AgentReplyError:
    """A reply that is not the API's JSON (a proxy's HTML page, a body cut short): the SDKs raise
    json's own error for it, which would otherwise end the run as an internal error."""
    kind = "JSON cut short" if isinstance(exc, json.JSONDecodeError) and exc.pos > 0 else "not JSON"
    return AgentReplyError(f"{who} answered with a reply that could not be read ({kind}: {exc}): check "
                           f"{endpoint_hint} points at the API itself, then `middle resume`")
