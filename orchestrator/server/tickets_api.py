"""The tickets API: list, read, create, and run / resume / revert in the background."""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING, Any, Callable

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import TicketError
from orchestrator.server.auth import share_key
from orchestrator.server.errors import Conflict, ReviewConflictBody, UntrackedFilesBody, error_response, error_responses
from orchestrator.server.people import person
from orchestrator.server.state import ServerState, get_state, run_or_404
from orchestrator.server.ticket_files import create_ticket_file
from tickets.claims import claim_is_live
from tickets.model import Ticket
from tickets.queries import TicketStats
from tickets.store import ResumeFacts

if TYPE_CHECKING:
    from orchestrator.workspace import Review

router = APIRouter(prefix="/api", tags=["tickets"])

_STORE = "the ticket store failed (e.g. locked by another process for too long)"
_NO_TICKET = "no such ticket"
_START = error_responses(
    400, 404, 409, 502, 503, e404=_NO_TICKET, e409="the ticket is running here or in another process",
    e502="the coding agent (Claude Code) or the model could not be set up", e503=_STORE,
    e400="the ticket cannot start now (complete, merged, an unmerged change, waiting for a dependency, "
         "no API key), or for resume: it never ran, or its last run ended for good")
_REVIEW = error_responses(
    400, 404, 409, 503, e400="the ticket's status does not allow it (e.g. never run, not complete)",
    e404=_NO_TICKET, e409="the ticket is running, the change conflicts, or uncommitted changes in "
                          "your working tree are in the way; nothing was changed", e503=_STORE)


class NewTicket(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(..., examples=["Add a greeting module"])
    project: str | None = Field(None, description="The project id (memory is per project); default "
                                "[project] id.", examples=["calc"])
    description: str = Field("", description="The ticket body, in Markdown.")
    id: str | None = Field(None, description="Default: NNN-slug-of-the-title.")
    path: str | None = Field(None, description="The project directory, relative to the ticket "
                                                "folder (default: [project] path); that directory or one inside it.")


class RunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rerun: bool = Field(False, description="Also start a ticket that is already complete.")


# A ticket in one of these states may have a run that `resume` continues.
_MAY_RESUME = ("failed", "interrupted", "running")


def resumable(facts: ResumeFacts | None, ticket: Ticket, running_here: bool) -> bool:
    """Would `POST .../resume` be accepted now? The latest run was interrupted, or failed in a way
    the runner marked resumable (a Claude Code turn or the model failed, or the agent gave up or
    hit a limit with its work kept on its branch), or is still `running` under a dead claim (its
    process was killed)."""
    if running_here or ticket.status.value not in _MAY_RESUME or facts is None:
        return False
    if facts.run["status"] == "running":
        return facts.claim is None or not claim_is_live(facts.claim)
    return bool((facts.run_end or {}).get("resumable", facts.run["status"] == "interrupted"))


def may_resume(tickets: list[Ticket], active: Container[str]) -> list[str]:
    """The tickets whose resume facts are worth reading: the others cannot be resumed."""
    return [t.id for t in tickets if t.status.value in _MAY_RESUME and t.id not in active]


def ticket_json(ticket: Ticket, stats: TicketStats | None = None, running_here: bool = False,
                facts: ResumeFacts | None = None) -> dict[str, Any]:
    data = ticket.to_dict()
    data.update(stats or {"turns": 0, "cost_usd": 0.0, "runs": 0, "offline_runs": 0, "last_event_at": None})
    data["running_here"] = running_here
    data["resumable"] = resumable(facts, ticket, running_here)
    return data


def share_path(state: ServerState, ticket_id: str) -> str:
    key = share_key(state.token, ticket_id)
    return f"/share/tickets/{ticket_id}" + (f"?key={key}" if key else "")


def ticket_detail(state: ServerState, ticket: Ticket) -> dict[str, Any]:
    store = state.store
    runs = []
    for run in reversed(store.list_runs(ticket.id)):  # newest first
        given = store.feedback(run["id"])  # a review round opens with one (orchestrator.running.feedback)
        checks: dict[int, list[dict[str, Any]]] = {}  # setup and check runs by the turn they followed
        started_by = None  # who started the run (its first run_start's `by`)
        for event in store.list_events(run_id=run["id"], limit=100_000):
            if event["kind"] == "run_start" and started_by is None:
                started_by = (event["data"] or {}).get("by") or None
            if event["kind"] in ("setup", "check"):
                checks.setdefault(int(event["data"].get("turn") or 0), []).append({**event["data"],
                                                                                   "kind": event["kind"]})
        runs.append({**run, "cost_usd": store.total_cost(run["id"]), "checks": checks,
                     "turns": store.list_turns(run_id=run["id"]), "feedback": given,
                     "started_by": started_by if isinstance(started_by, str) else None,
                     "round": next((e["round"] for e in given if e.get("round")), 1)})
    stats = store.ticket_stats().get(ticket.id)
    live = set(store.memory_docs(ticket.id))
    active = state.runs.active()
    facts = store.resume_facts(may_resume([ticket], active)).get(ticket.id)
    pr_url = runs[0].get("pr_url") if runs else None  # the latest run's pull request, if any
    from orchestrator.lifecycle.next_steps import situation
    from orchestrator.running.feedback import STARTS_ROUND, WAITS_FOR_ASSESS

    # What `POST .../feedback` takes now (the page shows its box exactly then).
    accepts_feedback = bool(runs) and situation(store, ticket.id) in (*STARTS_ROUND, *WAITS_FOR_ASSESS)
    return {**ticket_json(ticket, stats, ticket.id in active, facts), "runs": runs, "pr_url": pr_url,
            "accepts_feedback": accepts_feedback,
            "memory_docs": [{"doc": d, "deleted": d not in live}
                            for d in store.memory_docs(ticket.id, include_deleted=True)],
            "share_path": share_path(state, ticket.id)}


@router.get("/tickets", summary="Tickets, optionally of one project and/or one status",
            responses=error_responses(400, 503, e400="an unknown status", e503=_STORE))
def list_tickets(project: str | None = Query(None), status: str | None = Query(None),
                 state: ServerState = Depends(get_state)) -> dict[str, Any]:
    problems, folder_problem = state.sync_folder()
    store = state.store
    stats = store.ticket_stats()
    active = state.runs.active()
    tickets = store.list_tickets(status=status, project_id=project)
    facts = store.resume_facts(may_resume(tickets, active))
    return {"tickets": [ticket_json(t, stats.get(t.id), t.id in active, facts.get(t.id))
                        for t in tickets],
            "folder_problems": [str(p) for p in problems] + ([folder_problem] if folder_problem else [])}


@router.post("/tickets", status_code=201, summary="Create a ticket (written as a Markdown file)",
             responses=error_responses(
                 400, 409, 503, e400="a missing title or project, a bad project id, an id or path "
                 "that cannot be used", e409="a ticket with that id already exists", e503=_STORE))
def create(body: NewTicket, state: ServerState = Depends(get_state)) -> dict[str, Any]:
    project = body.project or state.config.project.id  # as a ticket file without `project:`
    if not project:
        raise TicketError("project is required: give the ticket's project id, or set [project] id in middle.toml")
    ticket = create_ticket_file(state.config, title=body.title, project=project,
                                description=body.description, ticket_id=body.id, path=body.path)
    stored = state.store.upsert_ticket(ticket)
    return ticket_json(stored)


@router.get("/tickets/{ticket_id}", summary="One ticket with its runs, turns and indexed docs",
            responses=error_responses(404, 503, e404=_NO_TICKET, e503=_STORE))
def get_ticket(ticket_id: str, state: ServerState = Depends(get_state)) -> dict[str, Any]:
    return ticket_detail(state, state.ticket(ticket_id))


def _started(state: ServerState, ticket_id: str, run_id: str | None) -> JSONResponse:
    if run_id is None:  # every [run] parallel slot is busy: it starts when one frees
        return JSONResponse(status_code=202, content={
            "ticket_id": ticket_id, "run_id": None, "status": "queued",
            "stream": f"/api/tickets/{ticket_id}/stream", "page": f"/tickets/{ticket_id}"})
    return JSONResponse(status_code=202, content={
        "ticket_id": ticket_id, "run_id": run_id, "status": "running",
        "events": f"/api/runs/{run_id}/events", "stream": f"/api/runs/{run_id}/stream",
        "page": f"/tickets/{ticket_id}"})


@router.post("/tickets/{ticket_id}/run", status_code=202,
             summary="Start a run in the background; returns at once with its run id", responses=_START)
def run(ticket_id: str, request: Request, body: RunBody | None = None,
        state: ServerState = Depends(get_state)) -> JSONResponse:
    state.ticket(ticket_id)
    run_id = state.runs.start(ticket_id, rerun=bool(body and body.rerun), by=person(request))
    return _started(state, ticket_id, run_id)


@router.post("/tickets/{ticket_id}/resume", status_code=202,
             summary="Continue the latest run from its checkpoint, in the background", responses=_START)
def resume(ticket_id: str, request: Request, state: ServerState = Depends(get_state)) -> JSONResponse:
    state.ticket(ticket_id)
    run_id = state.runs.resume(ticket_id, by=person(request))
    return _started(state, ticket_id, run_id)


class FeedbackBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(..., description="What to change, in your words (the next instruction).",
                      examples=["also handle empty input"])


@router.post("/tickets/{ticket_id}/feedback", status_code=202,
             summary="Request changes: a complete or conflicted ticket continues on its branch in a new "
                     "round (202, in the background); a running one gets the feedback at its next "
                     "assess (200, status `stored`)",
             responses={**_START, 200: {"description": "stored for the run in progress"}, **error_responses(
                 400, e400="empty feedback, or the ticket never ran, or is merged, discarded, reverted or "
                           "failed for good")})
def feedback(ticket_id: str, body: FeedbackBody, request: Request,
             state: ServerState = Depends(get_state)) -> JSONResponse:
    from orchestrator.running import feedback as rounds
    from orchestrator.server.background_runs import FeedbackStored

    state.ticket(ticket_id)
    stored = None
    with state.runs.feedback_lock:
        if rounds.check(state.store, ticket_id, body.text) == rounds.STORED:
            stored = rounds.store_for_run(state.store, ticket_id, body.text)  # None: the run just completed
        if stored is None:
            try:
                return _started(state, ticket_id, state.runs.feedback(ticket_id, body.text, by=person(request)))
            except FeedbackStored as exc:  # another process opened the round a moment before
                stored = str(exc)
    return JSONResponse(status_code=200, content={"ticket_id": ticket_id, "status": "stored", "message": stored})


def _review(state: ServerState, ticket_id: str, action: str) -> Review:
    state.ticket(ticket_id)
    if action != "diff" and ticket_id in state.runs.active():
        raise Conflict(f"ticket {ticket_id!r} is running: wait for it to end, then {action} it")
    return state.review()


@router.get("/tickets/{ticket_id}/diff",
            summary="The ticket's change against the commit it started from, per file", responses=_REVIEW)
def diff(ticket_id: str, state: ServerState = Depends(get_state)) -> dict[str, Any]:
    from orchestrator.workspace import split_patch

    result = _review(state, ticket_id, "diff").diff(ticket_id)
    patches = {f["path"]: f["patch"] for f in split_patch(result.pop("text"))}
    result["files"] = [{**f, "patch": patches.get(f["path"], "")} for f in result["files"]]
    return result


def _answer(result: Any, **extra: Any) -> JSONResponse:
    """A review result as JSON: 409 (with the message as `error`) when it conflicts, nothing changed."""
    body = {**result.to_dict(), **extra}
    if result.conflicts:
        return error_response(409, result.message, **body)
    return JSONResponse(status_code=200, content=body)


def _untracked(action: Callable[[], Any]) -> Any:
    """Run a discard (or a revert that discards); files git does not track in the worktree are a
    400 that lists them, so a client can ask the user and send `force`."""
    from orchestrator.workspace import UntrackedFiles

    try:
        return action()
    except UntrackedFiles as exc:
        return error_response(400, str(exc), untracked=exc.paths)


_CONFLICT: dict[str, Any] = {"model": ReviewConflictBody}
_UNTRACKED: dict[int | str, dict[str, Any]] = {400: {"model": UntrackedFilesBody, "description": (
    "Refused, nothing changed: the ticket's status does not allow it, or its worktree holds files git "
    "does not track (listed in `untracked`; send `force` to delete them)")}}


@router.post("/tickets/{ticket_id}/merge", summary="Merge the ticket's branch into the base branch "
             "(409 with the conflicting files, nothing changed, on a conflict)",
             responses={**_REVIEW, 409: {**_CONFLICT, "description": (
                 "Nothing was changed: the change conflicts (the files are listed), uncommitted "
                 "changes in your working tree are in the way, or the ticket is running")}})
def merge(ticket_id: str, state: ServerState = Depends(get_state)) -> JSONResponse:
    return _answer(_review(state, ticket_id, "merge").merge(ticket_id))


class DiscardBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    force: bool = Field(False, description="Also delete files in its worktree that git does not track.")


@router.post("/tickets/{ticket_id}/discard", summary="Remove the unmerged ticket's worktree, branch "
             "and memory doc", responses={**_REVIEW, **_UNTRACKED})
def discard(ticket_id: str, body: DiscardBody | None = None,
            state: ServerState = Depends(get_state)) -> Any:
    review = _review(state, ticket_id, "discard")
    return _untracked(lambda: review.discard(ticket_id, force=bool(body and body.force)).to_dict())


class RevertBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    done: bool = Field(False, description="You undid its merge by hand: check that the base branch lost "
                                          "its lines, mark it reverted and delete its memory doc.")
    force: bool = Field(False, description="With `done`: skip that check, and delete an unfinished "
                                           "revert's edits. Unmerged: as discard's `force`.")


@router.post("/tickets/{ticket_id}/revert", summary="Undo the ticket: a revert commit if merged "
             "(else discard), and delete its memory doc; a revert that conflicts waits in its own "
             "worktree (409 with its path and the conflicting files, nothing changed)",
             responses={**_REVIEW, **_UNTRACKED, 409: {**_CONFLICT, "description": (
                 "Nothing was changed: the revert conflicts and waits in `worktree` with conflict "
                 "markers (resolve and commit there, then revert again), an earlier one waits there "
                 "unfinished, uncommitted changes in your working tree are in the way, or the ticket "
                 "is running")}})
def revert(ticket_id: str, body: RevertBody | None = None, state: ServerState = Depends(get_state)) -> Any:
    review = _review(state, ticket_id, "revert")
    done, force = bool(body and body.done), bool(body and body.force)

    def act() -> JSONResponse:
        result = review.revert(ticket_id, done=done, force=force)
        return _answer(result, removed=result.memory_docs_deleted)

    return _untracked(act)


@router.get("/runs/{run_id}", summary="One run with its turns",
            responses=error_responses(404, 503, e404="no such run", e503=_STORE))
def get_run(run_id: str, state: ServerState = Depends(get_state)) -> dict[str, Any]:
    run_data = run_or_404(state.store, run_id)
    return {**run_data, "cost_usd": state.store.total_cost(run_id),
            "turns": state.store.list_turns(run_id=run_id)}


@router.get("/projects", summary="Per project: tickets done (complete or merged) and failed, real "
            "cost today and all time, offline runs", responses=error_responses(503, e503=_STORE))
def projects(state: ServerState = Depends(get_state)) -> list[dict[str, Any]]:
    state.sync_folder()
    return [dict(t) for t in state.store.project_totals()]


@router.get("/health", summary="Is the server up, with which memory backend and model")
def health(state: ServerState = Depends(get_state)) -> dict[str, Any]:
    cfg = state.config
    return {"ok": True, "memory_backend": cfg.memory.backend if cfg.memory_enabled else None,
            "fake_model": state.fake, "running": state.runs.active(), "live_streams": state.live_streams}


@router.post("/tickets/{ticket_id}/pr", summary="Push the complete ticket's branch and open its pull request "
             "on GitHub (the one it has, if opened before, brought up to date)",
             responses=error_responses(400, 404, 409, 503, e400="not complete, no token, GitHub refused, "
                                       "no remote, the push failed", e404=_NO_TICKET, e409="the ticket is running",
                                       e503=_STORE))
def pull_request(ticket_id: str, state: ServerState = Depends(get_state)) -> dict[str, Any]:
    from orchestrator.github.pull_updates import propose

    _review(state, ticket_id, "open a pull request for")
    said: list[str] = []
    pull = propose(state.store, state.config, ticket_id, say=said.append)  # (one it has: brought up to date)
    return {"url": pull.url, "number": pull.number, "created": pull.created, "message": " ".join(said)}
