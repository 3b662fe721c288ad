"""Run events as JSON and as Server-Sent Events, read from the store (so other processes' runs show too).

A stream starts after the id the client names (`?after=ID`, or the Last-Event-ID header a
reconnecting EventSource sends), so a page opened mid-run replays what it missed, then follows.
Unnamed, a run's or a ticket's stream starts at its first event; the all-runs stream starts now
(its history is the whole store). Each SSE message has the event's id, its kind as the SSE event
name, and the event as JSON. A stream ends as soon as its client leaves.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Callable

import anyio
import anyio.lowlevel
from fastapi import APIRouter, Depends, Query, Request
from sse_starlette import EventSourceResponse

from orchestrator.server.errors import error_responses
from orchestrator.server.state import ServerState, get_state, run_or_404, ticket_or_404

router = APIRouter(prefix="/api", tags=["events"])

POLL_S = 0.3  # a SQLite store is polled, not notified: another process's writes must show up too
PUSH_WAIT_S = 1.0  # a PostgreSQL store pushes events (LISTEN/NOTIFY); wake this often anyway
PING_S = 15
BATCH = 500
_STORE = "the ticket store failed (e.g. locked by another process for too long)"
_RUN = error_responses(400, 404, 503, e400="`after` or `limit` out of range", e404="no such run", e503=_STORE)
_TICKET = error_responses(400, 404, 503, e400="`after` or `limit` out of range", e404="no such ticket",
                          e503=_STORE)


AFTER = Query(None, ge=0, description="Send the events after this id (the Last-Event-ID header "
              "wins when it is higher).")


def _after(request: Request, after: int | None, default: Callable[[], int] = lambda: 0) -> int:
    """Where a stream starts: `after` or the Last-Event-ID header, else `default()` (called only
    then: the all-events stream's default, "now", is a query)."""
    header = request.headers.get("last-event-id", "")
    named = [n for n in (after, int(header) if header.isdigit() else None) if n is not None]
    return max(named) if named else default()


async def _stream(request: Request, state: ServerState, after: int, *, run_id: str | None = None,
                  ticket_id: str | None = None) -> AsyncIterator[dict[str, Any]]:
    """Yield events after `after` as they are stored; a run's stream ends when the run has ended,
    and every stream ends when its client has gone."""
    store, last, last_kind = state.store, after, None
    state.live_streams += 1  # only ever changed on the event loop's thread
    try:
        while not state.stopping.is_set():
            if await request.is_disconnected():
                return
            events = await anyio.to_thread.run_sync(
                lambda: store.list_events(run_id=run_id, ticket_id=ticket_id, after=last, limit=BATCH))  # noqa: B023
            for event in events:
                last, last_kind = event["id"], event["kind"]
                yield {"id": str(event["id"]), "event": event["kind"],
                       "data": json.dumps(event, ensure_ascii=False, default=str)}
                # Let the loop see a closed connection between two sends: without this a batch
                # is written in one go, and every write after the client left is a logged
                # "socket.send() raised exception".
                await anyio.lowlevel.checkpoint()
                if await request.is_disconnected():
                    return
            if events:
                continue
            if run_id is not None and last_kind == "run_end":
                run = await anyio.to_thread.run_sync(lambda: store.get_run(run_id))
                if run["status"] != "running":
                    yield {"event": "end", "data": json.dumps({"run_id": run_id, "status": run["status"]})}
                    return
            if getattr(store, "pushes_events", False):  # PostgreSQL: woken at once by NOTIFY
                await anyio.to_thread.run_sync(store.wait_for_events, PUSH_WAIT_S)
            else:
                await anyio.sleep(POLL_S)
    finally:
        state.live_streams -= 1


def _sse(generator: AsyncIterator[dict[str, Any]]) -> EventSourceResponse:
    return EventSourceResponse(generator, ping=PING_S, headers={"Cache-Control": "no-store"})


@router.get("/runs/{run_id}/events", summary="A run's events after an id, oldest first", responses=_RUN)
def run_events(run_id: str, after: int = Query(0, ge=0), limit: int = Query(1000, ge=1, le=5000),
               state: ServerState = Depends(get_state)) -> list[dict[str, Any]]:
    run_or_404(state.store, run_id)
    return state.store.list_events(run_id=run_id, after=after, limit=limit)


@router.get("/runs/{run_id}/stream", summary="A run's events live (SSE); ends when the run ends",
            response_class=EventSourceResponse, responses=_RUN)
def run_stream(run_id: str, request: Request, after: int | None = AFTER,
               state: ServerState = Depends(get_state)) -> EventSourceResponse:
    run_or_404(state.store, run_id)
    return _sse(_stream(request, state, _after(request, after), run_id=run_id))


@router.get("/tickets/{ticket_id}/events", summary="Events of all a ticket's runs after an id",
            responses=_TICKET)
def ticket_events(ticket_id: str, after: int = Query(0, ge=0), limit: int = Query(1000, ge=1, le=5000),
                  state: ServerState = Depends(get_state)) -> list[dict[str, Any]]:
    ticket_or_404(state.store, ticket_id)
    return state.store.list_events(ticket_id=ticket_id, after=after, limit=limit)


@router.get("/tickets/{ticket_id}/stream", summary="A ticket's events live (SSE), across its runs",
            response_class=EventSourceResponse, responses=_TICKET)
def ticket_stream(ticket_id: str, request: Request, after: int | None = AFTER,
                  state: ServerState = Depends(get_state)) -> EventSourceResponse:
    ticket_or_404(state.store, ticket_id)
    return _sse(_stream(request, state, _after(request, after), ticket_id=ticket_id))


@router.get("/events/stream", summary="Every run's events live (SSE), from now on unless `after` "
            "or Last-Event-ID names an id: what the board follows", response_class=EventSourceResponse,
            responses=error_responses(400, 503, e400="`after` is not a whole number of at least 0",
                                      e503=_STORE))
def all_stream(request: Request, after: int | None = AFTER,
               state: ServerState = Depends(get_state)) -> EventSourceResponse:
    return _sse(_stream(request, state, _after(request, after, default=state.store.last_event_id)))
