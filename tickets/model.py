"""The ticket model: statuses, safe ids and the `Ticket` record shared by the store and sources."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tickets.errors import ConfigError, TicketError

__all__ = [
    "TicketStatus",
    "RunStatus",
    "Ticket",
    "validate_project_id",
    "validate_ticket_id",
    "utc_now",
    "normalize_timestamp",
]

# Ids become directory names (memory stores live at <save_dir>/<project_id>/) and CLI arguments,
# so they must never be able to escape a directory or hide a file: no separators, no leading dot.
_SAFE_ID = re.compile(r"[A-Za-z0-9._-]+")
MAX_ID_LENGTH = 100


class TicketStatus(str, Enum):
    """Where a ticket is in its life: waiting, being worked, finished, or undone by a revert."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # stopped by the user (Ctrl-C); `middle resume` continues it
    REVERTED = "reverted"  # memory doc deleted, and a merged change undone by a revert commit
    MERGED = "merged"  # the ticket's branch is merged into the base branch (`middle merge`)
    CONFLICT = "conflict"  # a merge found conflicts; the base branch was left as it was
    DISCARDED = "discarded"  # its worktree and branch removed unmerged (`middle discard`)


class RunStatus(str, Enum):
    """The state of one attempt at a ticket (one LangGraph thread)."""

    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


def _unsafe_reason(value: object) -> str | None:
    """Why `value` is not a safe id, or None when it is."""
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not text"
    if not value:
        return "is empty"
    if len(value) > MAX_ID_LENGTH:
        return f"is {len(value)} characters long (at most {MAX_ID_LENGTH})"
    if value.startswith("."):
        return "starts with '.'"
    if not _SAFE_ID.fullmatch(value):
        return "is not safe"
    return None


def _id_message(kind: str, value: object, reason: str) -> str:
    shown = value if isinstance(value, str) else repr(value)
    return (
        f"{kind} id '{shown}' {reason}: use 1 to {MAX_ID_LENGTH} letters, digits, '.', '_' and '-' "
        "only, not starting with '.' (no '/', no '..')"
    )


def validate_project_id(pid: str) -> str:
    """Return `pid` if it is safe to use as a directory name, else raise ConfigError."""
    reason = _unsafe_reason(pid)
    if reason:
        raise ConfigError(_id_message("project", pid, reason))
    return pid


def validate_ticket_id(tid: str) -> str:
    """Return `tid` if it follows the project-id rule, else raise TicketError."""
    reason = _unsafe_reason(tid)
    if reason:
        raise TicketError(_id_message("ticket", tid, reason))
    return tid


def utc_now() -> str:
    """The current time as ISO-8601 UTC with microseconds (sortable as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def normalize_timestamp(value: str) -> str:
    """Parse an ISO-8601 timestamp and return it in the one UTC format the store sorts by.

    A timestamp without an offset is taken to be UTC already.
    """
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"timestamp {value!r} is not ISO-8601: write it like '2025-01-31T12:00:00+00:00'"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc).isoformat(timespec="microseconds")


class Ticket(BaseModel):
    """One unit of work for the middle agent, in one project directory."""

    # Unknown attributes are a typo, not data: extra front matter belongs in `fields`.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str
    project_id: str
    title: str
    description: str = ""
    project_path: str
    status: TicketStatus = TicketStatus.PENDING
    created_at: str = Field(default_factory=utc_now)
    updated_at: str = Field(default_factory=utc_now)
    source: str | None = None
    fields: dict[str, Any] = Field(default_factory=dict)
    status_reason: str | None = None
    depends_on: list[str] = Field(default_factory=list)  # ticket ids that must be done first

    # Validators raise ValueError so pydantic reports every problem in one ValidationError.
    @field_validator("id")
    @classmethod
    def _check_id(cls, v: str) -> str:
        try:
            return validate_ticket_id(v)
        except TicketError as err:
            raise ValueError(str(err)) from None

    @field_validator("project_id")
    @classmethod
    def _check_project_id(cls, v: str) -> str:
        try:
            return validate_project_id(v)
        except ConfigError as err:
            raise ValueError(str(err)) from None

    @field_validator("title")
    @classmethod
    def _check_title(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("title is empty: give the ticket a short title")
        return v

    @field_validator("depends_on")
    @classmethod
    def _check_depends_on(cls, v: list[str]) -> list[str]:
        for tid in v:
            try:
                validate_ticket_id(tid)
            except TicketError as err:
                raise ValueError(f"depends_on: {err}") from None
        return list(dict.fromkeys(v))  # a repeated id is one dependency

    @field_validator("project_path")
    @classmethod
    def _check_project_path(cls, v: str) -> str:
        if not v or not Path(v).is_absolute():
            raise ValueError(f"project path {v!r} is not absolute: resolve it before building a Ticket")
        return v

    @field_validator("created_at", "updated_at")
    @classmethod
    def _check_timestamp(cls, v: str) -> str:
        return normalize_timestamp(v)

    @field_validator("fields")
    @classmethod
    def _check_fields(cls, v: dict[str, Any]) -> dict[str, Any]:
        # The store keeps fields as JSON and graph state must stay JSON-able, so check it here.
        try:
            json.dumps(v, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise ValueError(f"fields must be JSON-able (strings, numbers, lists, maps): {err}") from None
        return v
