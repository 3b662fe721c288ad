"""HTTP errors of `middle serve`: every MiddleError becomes `{"error": message}` with a fitting status."""

from __future__ import annotations

import logging
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from orchestrator.errors import (
    AgentReplyError,
    CodingAgentError,
    ConfigError,
    GitError,
    MemoryStoreError,
    MiddleError,
    StoreError,
    TicketError,
)
from orchestrator.memory.facade import MemoryRequestTooLarge

log = logging.getLogger("middle.server")


def error_response(status: int, message: str, /, *, headers: dict[str, str] | None = None,
                   **extra: Any) -> JSONResponse:
    """The one shape of an error answer: `{"error": message}` (plus `extra` fields a route
    documents, e.g. a merge conflict's files), with its status."""
    return JSONResponse({**extra, "error": message}, status_code=status, headers=headers or None)


class NotFound(MiddleError):
    """An unknown ticket, run or page (404)."""


class Conflict(MiddleError):
    """The ticket is claimed by another run, here or in another process (409)."""


class Forbidden(MiddleError):
    """A request refused by the token gate or the cross-site check (403)."""


class MemoryOff(MemoryStoreError):
    """Memory is not configured, so the memory API has nothing to serve (503)."""


def status_for(exc: MiddleError) -> int:
    """The HTTP status of a MiddleError: the client's mistake, a missing thing, or a broken part."""
    if isinstance(exc, (NotFound, LookupError)):  # LookupError: e.g. no memory doc with that id
        return 404
    if isinstance(exc, (Conflict, GitError)):  # the repository's state is in the way (dirty, conflict)
        return 409
    if isinstance(exc, Forbidden):
        return 403
    if isinstance(exc, MemoryRequestTooLarge):  # a call over [memory] max_request_chars
        return 413
    if isinstance(exc, ValueError):  # the memory facade's bad arguments (MemoryArgumentError)
        return 400
    if isinstance(exc, (MemoryStoreError, StoreError)):
        return 503  # the memory or ticket store failed; the request itself was fine
    if isinstance(exc, (CodingAgentError, AgentReplyError)):
        return 502
    if isinstance(exc, (ConfigError, TicketError)):
        return 400
    return 400


# The largest request body the server reads: refused with a 413 from its Content-Length, or once
# that many bytes have come, before anything parses it. 400 docs of [memory] max_doc_chars fit
# (what one call may ask of memory is bounded apart, by [memory] max_request_chars).
MAX_BODY_BYTES = 8 * 1024 * 1024


def body_too_large(limit: int) -> str:
    """The message of a 413: the limit, and what to send instead."""
    return (f"the request body is over this server's limit of {limit:,} bytes ({limit / 2**20:g} "
            "MiB), so nothing was done: send less per request (docs in batches; a query of a few key "
            "words, [memory] max_query_chars at most)")


def memory_off() -> MemoryOff:
    return MemoryOff("memory is off on this server: set [memory] save_dir in middle.toml (or "
                     "MEMORY_SAVE_DIR) and a backend other than 'none', then restart `middle serve`")


# -- how errors are documented in the OpenAPI document ------------------------------------------

class ErrorBody(BaseModel):
    """The body of every error answer."""
    error: str = Field(..., description="What went wrong and what to do about it, in one sentence.",
                       examples=["no ticket 'nope': list them with `middle tickets`"])


class ReviewConflictBody(ErrorBody):
    """A merge or a revert that conflicts: nothing was changed; the files that conflict are listed,
    and for a revert the worktree where it waits, with conflict markers, to be resolved."""
    ticket_id: str
    status: str = Field(..., description="The ticket's status: `conflict` after a merge, still "
                                         "`merged` after a revert", examples=["conflict"])
    message: str
    commit: str | None
    conflicts: list[str] = Field(..., examples=[["calc/greeting.py"]])
    memory_docs_deleted: int
    worktree: str | None = Field(None, description="Where the revert waits to be resolved and committed",
                                 examples=["/home/me/calc/.middle/reverts/001-greeting"])
    warnings: list[str] = Field(default_factory=list)


class UntrackedFilesBody(ErrorBody):
    """A refused discard (or revert of an unmerged ticket): nothing was changed. When it would have
    deleted files in the ticket's worktree that git does not track, `untracked` lists them: send
    `{"force": true}` to delete them with it."""
    untracked: list[str] = Field(default_factory=list, examples=[["notes.txt"]])


# What each status means wherever it is answered; a route adds what is particular to it.
_MEANING = {
    400: "Bad request: a malformed body or parameter, or something the request asks that cannot be done now",
    401: "This server has a token (MIDDLE_API_TOKEN) and the request sent none or a wrong one",
    403: "Refused: a Host name that is not loopback on a server without a token, a cross-site request, "
         "or a missing CSRF token with the login cookie",
    404: "Not found",
    413: "The request body is over the server's limit (MAX_BODY_BYTES, 8 MiB), refused before it is read",
    409: "In the way: another run holds the ticket, or the repository's state blocks the change (nothing changed)",
    502: "The coding agent or the model failed to start",
    503: "Memory is off on this server, or the memory store or the ticket store failed",
}


def error_responses(*codes: int, **why: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for the error statuses a route answers, each `{"error": message}`;
    `why` adds what a status means on this route (keys like `e404`)."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        text = _MEANING[code] + (f": {why[f'e{code}']}" if f"e{code}" in why else "")
        out[code] = {"model": ErrorBody, "description": text}
    return out


def document_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Make the generated OpenAPI document say what the API does: FastAPI lists a 422 with its own
    validation body on every route with parameters, but this API answers a bad request with 400
    `{"error": ...}`; and the token gate can answer 401/403 on any /api route."""
    for path, item in schema.get("paths", {}).items():
        for operation in item.values():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            if path.startswith("/api/"):
                for code in (401, 403):
                    responses.setdefault(str(code), {
                        "description": _MEANING[code],
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}})
    schemas = schema.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return schema
