"""The ticket model: statuses, safe ids and the `Ticket` record shared by the store and sources."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, Callable, TypedDict

from tickets.errors import ConfigError, TicketError

__all__ = [
    "TicketStatus",
    "RunStatus",
    "Ticket",
    "TicketValidationError",
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
        bad = next(c for c in value if not _SAFE_ID.fullmatch(c))
        return f"holds {bad!r}"
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


def _branch_reason(tid: str) -> str | None:
    """Why a ticket id (already of safe characters) cannot name its branch `middle/<id>`, its
    work-in-progress ref and its worktree, or None. These are git's own rules for a ref name
    (`git check-ref-format`: no '..', no part ending in '.' or '.lock'), written out here so an
    id is checked where it is read, with no git process; the others (no space, control
    character, '~^:?*[\\', '@{') cannot occur in safe characters. And no leading '-': the id is
    also passed to git and other commands where it would read as an option ('-rf', '--help')."""
    if tid.startswith("-"):
        return "starts with '-' (a command would read it as an option)"
    if ".." in tid:
        return "holds '..' (git refuses it in a branch name)"
    if tid.endswith(".lock"):
        return "ends with '.lock' (git refuses it in a branch name: its lock files end so)"
    if tid.endswith("."):
        return "ends with '.' (git refuses it in a branch name)"
    return None


def validate_ticket_id(tid: str) -> str:
    """Return `tid` if it follows the project-id rule and can name the ticket's git branch
    (see _branch_reason), else raise TicketError."""
    reason = _unsafe_reason(tid) or _branch_reason(tid)
    if reason:
        raise TicketError(_id_message("ticket", tid, reason).replace(
            "not starting with '.' (no '/', no '..')",
            "not starting with '.' or '-', not ending with '.' or '.lock' (no '/', no '..')"))
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


class TicketValidationError(TicketError, ValueError):
    """A `Ticket` built or changed with bad values; `problems` lists every one, each a full sentence."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid ticket: " + "; ".join(problems))


def _text(name: str, *, optional: bool = False) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise ValueError(f"{name} must be text, not {type(value).__name__}")
        return value
    return check


def _id(value: Any) -> str:
    try:
        return validate_ticket_id(value)
    except TicketError as err:
        raise ValueError(str(err)) from None


def _project_id(value: Any) -> str:
    try:
        return validate_project_id(value)
    except ConfigError as err:
        raise ValueError(str(err)) from None


def _title(value: Any) -> str:
    value = _text("title")(value).strip()
    if not value:
        raise ValueError("title is empty: give the ticket a short title")
    return value


def _project_path(value: Any) -> str:
    if not isinstance(value, str) or not value or not Path(value).is_absolute():
        raise ValueError(f"project path {value!r} is not absolute: resolve it before building a Ticket")
    return value


def _status(value: Any) -> TicketStatus:
    try:
        return TicketStatus(value)
    except ValueError:
        raise ValueError(f"status {value!r} is not one of {', '.join(s.value for s in TicketStatus)}") from None


def _timestamp(value: Any) -> str:
    return normalize_timestamp(_text("timestamp")(value))


def _fields(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"fields must be a map, not {type(value).__name__}")
    # The store keeps fields as JSON and graph state must stay JSON-able, so check it here.
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"fields must be JSON-able (strings, numbers, lists, maps): {err}") from None
    return value


def _depends_on(value: Any) -> list[str]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(f"depends_on must be a list of ticket ids, not {type(value).__name__}")
    for tid in value:
        try:
            validate_ticket_id(tid)
        except TicketError as err:
            raise ValueError(f"depends_on: {err}") from None
    return list(dict.fromkeys(value))  # a repeated id is one dependency


# Every field's check, run on construction (all problems reported together) and on assignment.
_CHECKS: dict[str, Callable[[Any], Any]] = {
    "id": _id,
    "project_id": _project_id,
    "title": _title,
    "description": _text("description"),
    "project_path": _project_path,
    "status": _status,
    "created_at": _timestamp,
    "updated_at": _timestamp,
    "source": _text("source", optional=True),
    "fields": _fields,
    "status_reason": _text("status_reason", optional=True),
    "depends_on": _depends_on,
}


# A stdlib dataclass, not a pydantic model: `middle tickets` and `middle log` build Tickets from
# the store and would otherwise import pydantic (half their start-up time) for a dozen checks.
@dataclass(eq=True, kw_only=True)
class Ticket:
    """One unit of work for the middle agent, in one project directory.

    Every value is checked when a Ticket is built (all problems in one TicketValidationError) and
    when an attribute is set; an unknown attribute is a TypeError (extra front matter belongs in
    `fields`). `replace()` makes a checked copy; `to_dict()` is its JSON form.
    """

    id: str
    project_id: str
    title: str
    description: str = ""
    project_path: str
    status: TicketStatus = TicketStatus.PENDING
    created_at: str = field(default_factory=utc_now)
    updated_at: str = field(default_factory=utc_now)
    source: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    status_reason: str | None = None
    depends_on: list[str] = field(default_factory=list)  # ticket ids that must be done first

    def __post_init__(self) -> None:
        problems = []
        for name, check in _CHECKS.items():
            try:
                object.__setattr__(self, name, check(self.__dict__[name]))
            except ValueError as err:
                problems.append(str(err))
        if problems:
            raise TicketValidationError(problems)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _CHECKS:
            raise AttributeError(f"Ticket has no attribute {name!r}")
        if name in self.__dict__:  # after construction: check the one value (as on build)
            try:
                value = _CHECKS[name](value)
            except ValueError as err:
                raise TicketValidationError([str(err)]) from None
        object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> Ticket:
        """A copy with `changes`, checked as a new Ticket is."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The ticket as JSON-able data (status as its text)."""
        data = {name: getattr(self, name) for name in _CHECKS}
        data["status"] = self.status.value
        data["fields"] = json.loads(json.dumps(self.fields))  # a copy: callers may change it
        data["depends_on"] = list(self.depends_on)
        return data


class RunRow(TypedDict):
    """A run as the ticket store returns it (`get_run`, `list_runs`, `latest_run`): typed, so a
    misspelt field is a type error, not a None at run time. `run_id` repeats `id` (graph state
    and turn rows name it so); `changes` is the committed paths' numstat, None until committed."""

    id: str
    run_id: str
    ticket_id: str
    status: str
    reason: str | None
    plan_memories: str | None
    plan_prompt: str | None
    total_cost_usd: float
    started_at: str
    ended_at: str | None
    isolation: str | None
    repo: str | None
    base_branch: str | None
    base_commit: str | None
    branch: str | None
    worktree: str | None
    head_commit: str | None
    changes: list[dict[str, Any]] | None
    merge_commit: str | None
    premerge_commit: str | None
    revert_commit: str | None
    offline: int
    pr_url: str | None
    pr_state: str | None
    pr_due: str | None
    check_status: str | None
    corrections: int | None
    check_budget: int | None
    check_note: str | None


class TurnRow(TypedDict):
    """A coding-agent turn as the ticket store returns it (`get_turn`, `list_turns`)."""

    run_id: str
    turn_no: int
    prompt: str
    response: str | None
    memories_invoked: str | None
    decision: dict[str, Any] | None
    session_id: str | None
    resume: bool
    cost_usd: float
    duration_ms: int
    usage: dict[str, Any]
    num_turns: int
    is_error: bool
    error: str | None
    status: str
    started_at: str
    ended_at: str | None
    coding_agent: str | None  # the kind whose session this is (None: stored before schema 15)


@dataclass(frozen=True)
class TurnRecord:
    """One coding-agent turn as stored in the execution log: what `on_turn_end` plugins receive."""

    run_id: str
    turn_no: int
    prompt: str
    response: str | None
    status: str  # running | done | error | interrupted
    session_id: str | None = None
    resume: bool = False
    cost_usd: float = 0.0
    duration_ms: int = 0
    num_turns: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    error: str | None = None
    memories_invoked: str | None = None
    decision: dict[str, Any] | None = None
    started_at: str | None = None
    ended_at: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "TurnRecord":
        """From a ticket store turn dict (unknown keys are ignored)."""
        return cls(**{k: row[k] for k in cls.__dataclass_fields__ if k in row})

    def __getitem__(self, key: str) -> Any:
        # Plugins written when this hook passed the stored row as a dict keep working.
        return getattr(self, key)
