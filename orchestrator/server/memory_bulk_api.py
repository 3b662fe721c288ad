"""Bulk curation over HTTP, as `middle memory delete|supersede --source ... [--yes]` does it: look
at the docs a filter picks a page at a time (`GET .../memory/bulk`, with a `confirm` token for
that selection), then forget or supersede them all as one change (`POST .../bulk/forget`,
`.../bulk/supersede`, with the token), which one undo (`POST .../changes/N/undo`) takes back.

The filter, the change and its undo are the CLI's own (memory.bulk); the docs a filter picks
are read from the server's kept catalog (memory.catalog, caught up with every write), not from
a listing of the whole store for every page (bulk.select_kept: the same docs in the same order
as the CLI's bulk.select). This module only reads the request and says the result. A token
no longer matching what the filter picks (the docs changed since the person looked) is refused
with a 409: look again, then confirm.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.memory import bulk
from orchestrator.memory.catalog import DEFAULT_PAGE, MAX_PAGE
from orchestrator.server.errors import Conflict, error_responses
from orchestrator.server.memory_api import _curator, project_catalog
from orchestrator.server.people import who
from orchestrator.server.state import ServerState, get_state

router = APIRouter(prefix="/api/projects/{project_id}/memory", tags=["memory"])

_ERRORS = error_responses(400, 409, 503, e400="no filter, a bad filter (source, date) or cursor, "
                          "or nothing left to change", e409="the docs the filter picks changed "
                          "since `confirm` was given: look again and confirm those",
                          e503="memory is off, or the backend's store failed")

_FILTER_HELP = {
    "source": "ticket, commit, file, transcript, hand, api, supersede or unknown.",
    "ticket": "Only docs this ticket indexed.",
    "before": "Only docs dated before this (YYYY-MM-DD: that day's start, UTC; or a time).",
    "after": "Only docs dated on or after this.",
    "containing": "Only docs whose text contains this (case-insensitive).",
}


class BulkBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    source: str | None = Field(None, description=_FILTER_HELP["source"])
    ticket: str | None = Field(None, description=_FILTER_HELP["ticket"])
    before: str | None = Field(None, description=_FILTER_HELP["before"])
    after: str | None = Field(None, description=_FILTER_HELP["after"])
    containing: str | None = Field(None, description=_FILTER_HELP["containing"])
    confirm: str = Field(..., description="The `confirm` of `GET .../memory/bulk` with the same "
                         "filter: the selection the person looked at.")

    def flt(self) -> bulk.DocFilter:
        return bulk.DocFilter.of(source=self.source, ticket=self.ticket, before=self.before,
                                 after=self.after, containing=self.containing)


class SupersedeBody(BulkBody):
    with_: str = Field(..., alias="with", description="The doc that replaces every doc picked.")


@router.get("/bulk", summary="The docs a filter picks, a page at a time, with the token that "
            "confirms a bulk forget or supersede of exactly them", responses=_ERRORS)
def selection(project_id: str, state: ServerState = Depends(get_state),
              source: str | None = Query(None, description=_FILTER_HELP["source"]),
              ticket: str | None = Query(None, description=_FILTER_HELP["ticket"]),
              before: str | None = Query(None, description=_FILTER_HELP["before"]),
              after: str | None = Query(None, description=_FILTER_HELP["after"]),
              containing: str | None = Query(None, description=_FILTER_HELP["containing"]),
              limit: int = Query(DEFAULT_PAGE, ge=1, le=MAX_PAGE, description="Docs per page."),
              cursor: str | None = Query(None, description="The previous page's `next_cursor`."),
              ) -> dict[str, Any]:
    curator, pid = _curator(project_id, state)
    flt = bulk.DocFilter.of(source=source, ticket=ticket, before=before, after=after,
                            containing=containing)
    catalog, picked = _kept_selection(state, curator, pid, flt)
    shown, next_cursor = bulk.page_of_keyed(picked, limit, cursor)
    return {"project": pid, "filter": flt.words(), "count": len(picked),
            "confirm": bulk.token_of_ids([key for _, key in picked]),
            "docs": [catalog.describe(text) for text, _ in shown], "next_cursor": next_cursor}


def _kept_selection(state: ServerState, curator: Any, pid: str,
                    flt: bulk.DocFilter) -> tuple[Any, list[tuple[str, str]]]:
    """The docs the filter picks, from the project's kept catalog (caught up with every write
    first), not a listing of the whole store for each page."""
    catalog = project_catalog(state, curator.facade, pid)
    return catalog, bulk.select_kept(catalog, flt, curator.facade.backend_cls.keeps_times)


def _picked(state: ServerState, curator: Any, pid: str,
            body: BulkBody) -> tuple[bulk.DocFilter, list[str]]:
    flt = body.flt()
    # the same selection the pages showed (their token), so a confirm matches what was seen
    _, picked = _kept_selection(state, curator, pid, flt)
    docs = [text for text, _ in picked]
    if docs and bulk.token_of_ids([key for _, key in picked]) != body.confirm:
        raise Conflict(f"the filter ({flt.words()}) picks other docs now than when you looked "
                       f"({len(docs)} now): look at them again (GET .../memory/bulk) and confirm those")
    return flt, docs


@router.post("/bulk/forget", summary="Delete every doc a filter picks, as one change (one undo "
             "puts them all back)", responses=_ERRORS)
def bulk_forget(project_id: str, body: BulkBody, request: Request,
                state: ServerState = Depends(get_state)) -> dict[str, Any]:
    curator, pid = _curator(project_id, state)
    flt, docs = _picked(state, curator, pid, body)
    done = bulk.forget_all(curator, pid, docs, who(request), flt.words())
    return {"project": pid, "count": len(docs), **done.shown(curator.facade, pid)}


@router.post("/bulk/supersede", summary="Replace every doc a filter picks with one new doc, keeping "
             "them as history, as one change", responses=_ERRORS)
def bulk_supersede(project_id: str, body: SupersedeBody, request: Request,
                   state: ServerState = Depends(get_state)) -> dict[str, Any]:
    curator, pid = _curator(project_id, state)
    flt, docs = _picked(state, curator, pid, body)
    done = bulk.supersede_all(curator, pid, docs, body.with_, who(request), flt.words())
    return {"project": pid, "count": len(docs), **done.shown(curator.facade, pid)}
