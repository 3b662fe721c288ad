"""Run events as JSON and as Server-Sent Events, read from the store (so other processes' runs show too).

A stream starts after the id the client names (`?after=ID`, or the Last-Event-ID header a
reconnecting EventSource sends), so a page opened mid-run replays what it missed, then follows.
Each SSE message has the event's id, its kind as the SSE event name, and the event as JSON.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator

import anyio
from fastapi import APIRouter, Depends, Query, Request
from sse_starlette import EventSourceResponse

from orchestrator.server.state import ServerState, get_state, run_or_404, ticket_or_404

router = APIRouter(prefix="/api", tags=["events"])

POLL_S = 0.3  # the store is polled, not notified: another process's writes must show up too
PING_S = 15
BATCH = 500


def _after(request: Request, after: int) -> int:
    header = request.headers.get("last-event-id", "")
    return max(after, int(header)) if header.isdigit() else after


async def _stream(request: Request, state: ServerState, after: int, *, run_id: str | None = None,
                  ticket_id: str | None = None) -> AsyncIterator[dict[str, Any]]:
    """Yield events after `after` as they are stored; a run's stream ends when the run has ended."""
    store, last, last_kind = state.store, after, None
    while not state.stopping.is_set():
        if await request.is_disconnected():
            return
        events = await anyio.to_thread.run_sync(
            lambda: store.list_events(run_id=run_id, ticket_id=ticket_id, after=last, limit=BATCH))
        for event in events:
            last, last_kind = event["id"], event["kind"]
            yield {"id": str(event["id"]), "event": event["kind"],
                   "data": json.dumps(event, ensure_ascii=False, default=str)}
        if events:
            continue
        if run_id is not None and last_kind == "run_end":
            run = await anyio.to_thread.run_sync(lambda: store.get_run(run_id))
            if run["status"] != "running":
                yield {"event": "end", "data": json.dumps({"run_id": run_id, "status": run["status"]})}
                return
        await anyio.sleep(POLL_S)


def _sse(generator: AsyncIterator[dict[str, Any]]) -> EventSourceResponse:
    return EventSourceResponse(generator, ping=PING_S, headers={"Cache-Control": "no-store"})


@router.get("/runs/{run_id}/events", summary="A run's events after an id, oldest first")
def run_events(run_id: str, after: int = Query(0, ge=0), limit: int = Query(1000, ge=1, le=5000),
               state: ServerState = Depends(get_state)) -> list[dict[str, Any]]:
    run_or_404(state.store, run_id)
    return state.store.list_events(run_id=run_id, after=after, limit=limit)


@router.get("/runs/{run_id}/stream", summary="A run's events live (SSE); ends when the run ends",
            response_class=EventSourceResponse)
def run_stream(run_id: str, request: Request, after: int = Query(0, ge=0),
               state: ServerState = Depends(get_state)) -> EventSourceResponse:
    run_or_404(state.store, run_id)
    return _sse(_stream(request, state, _after(request, after), run_id=run_id))


@router.get("/tickets/{ticket_id}/events", summary="Events of all a ticket's runs after an id")
def ticket_events(ticket_id: str, after: int = Query(0, ge=0), limit: int = Query(1000, ge=1, le=5000),
                  state: ServerState = Depends(get_state)) -> list[dict[str, Any]]:
    ticket_or_404(state.store, ticket_id)
    return state.store.list_events(ticket_id=ticket_id, after=after, limit=limit)


@router.get("/tickets/{ticket_id}/stream", summary="A ticket's events live (SSE), across its runs",
            response_class=EventSourceResponse)
def ticket_stream(ticket_id: str, request: Request, after: int = Query(0, ge=0),
                  state: ServerState = Depends(get_state)) -> EventSourceResponse:
    ticket_or_404(state.store, ticket_id)
    return _sse(_stream(request, state, _after(request, after), ticket_id=ticket_id))


@router.get("/events/stream", summary="Every run's events live (SSE): what the board follows",
            response_class=EventSourceResponse)
def all_stream(request: Request, after: int = Query(0, ge=0),
               state: ServerState = Depends(get_state)) -> EventSourceResponse:
    return _sse(_stream(request, state, _after(request, after)))
