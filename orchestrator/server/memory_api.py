"""The memory HTTP API: the memory contract's index / retrieve / delete, plus list, search, edit and stats.

Arguments go to the memory facade as they came, so the API refuses exactly what the facade
refuses, with the facade's message. A read-only call on a project that has no store yet answers
empty without creating one.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import anyio
from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.memory.catalog import (
    DEFAULT_PAGE,
    MAX_PAGE,
    Catalog,
    DocQuery,
    build_catalog,
    catch_up,
    usage_by_doc,
)
from orchestrator.memory.facade import DOC_ID_CHARS, doc_id
from orchestrator.server.errors import error_responses
from orchestrator.server.people import who
from orchestrator.server.state import ServerState, checked_project, get_state
from tickets.queries import DocSource

if TYPE_CHECKING:
    from orchestrator.memory.facade import MemoryFacade
    from orchestrator.plugins.memory_backend import RetrieveResult as Retrieved

router = APIRouter(prefix="/api/projects/{project_id}/memory", tags=["memory"])

# Every memory route: a bad project id or body is a 400 (a doc over [memory] max_doc_chars, a
# query over max_query_chars too); a body over the server's limit, or docs or queries over
# [memory] max_request_chars in all, a 413; memory off or a failing store a 503.
_ERRORS = error_responses(400, 413, 503, e400="e.g. a project id with a '/', docs that are not a "
                          "list of strings, a doc over [memory] max_doc_chars or a query over "
                          "[memory] max_query_chars", e413="or the call's docs or queries hold more "
                          "than [memory] max_request_chars characters in all",
                          e503="memory is off, or the backend's store failed")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DocsBody(_Body):
    docs: Any = Field(..., description="The docs, a list of strings.",
                      examples=[["Ticket: Fix login. Users could not sign in. Reset the session cookie."]])


class RetrieveBody(_Body):
    queries: Any = Field(..., description="The questions, a list of strings.", examples=[["login bug"]])
    num_to_retrieve: Any = Field(None, description="How many docs per query (default: the server's "
                                                  "[memory] num_to_retrieve).", examples=[5])


class EditBody(_Body):
    old: str = Field(..., description="The exact text of the doc to replace.")
    new: str = Field(..., description="The text to index in its place.")


class TextBody(_Body):
    text: Any = Field(..., description="The doc's text.", examples=["Ticket: Login. Sessions use JWT."])


class DatedTextBody(TextBody):
    valid_until: str | None = Field(None, description="When the doc expires (YYYY-MM-DD: valid "
                                    "through that day, UTC; on edit, \"never\" clears it): then "
                                    "it leaves recall and is shown as expired.",
                                    examples=["2026-12-31"])


class RetrieveResult(BaseModel):
    question: str
    docs: list[str]
    doc_scores: list[float]


def _facade(project_id: str, state: ServerState) -> tuple[MemoryFacade, str]:
    pid = checked_project(project_id)  # a 400 naming the id, before any path is built
    return state.memory(), pid


def _with_sources(state: ServerState, pid: str) -> dict[str, list[DocSource]]:
    return state.store.doc_sources(pid)


_CREATE = Query(False, description="Start the memory of a project no config, ticket or store knows "
                                   "yet (without it, such a project id is a 404: a typo would start "
                                   "an empty store).")
_NEW_ERRORS = {**_ERRORS, **error_responses(404, e404="no project has that id: pass create=true to "
                                                      "start one on purpose")}


def _known(state: ServerState, mem: MemoryFacade, pid: str, create: bool) -> str:
    """`pid` when the project is known or `create` starts it on purpose (memory.projects)."""
    from orchestrator.memory.projects import check_known

    config = state.config
    known = [config.project.id or config.resolve(config.project.path).name, *state.project_ids()]
    return check_known(mem, pid, known, create=create, how="pass ?create=true")


@router.post("/index", summary="Index docs (the memory contract)", responses=_NEW_ERRORS)
def index(project_id: str, body: DocsBody, request: Request, create: bool = _CREATE,
          state: ServerState = Depends(get_state)) -> dict[str, Any]:
    mem, pid = _facade(project_id, state)
    _known(state, mem, pid, create)
    # A client's doc is kept whole or refused, and its call within [memory] max_request_chars
    # (a 413); the work stops between batches once the client has gone.
    mem.index(pid, body.docs, refuse_long=True, gone=client_gone(request))
    # Where each came from, for `middle memory show` and the board (a doc with one keeps it).
    state.store.note_memory_origins(pid, [(doc_id(d), d, {"kind": "api"}) for d in body.docs],
                                    who(request))
    return {"project": pid, "indexed": len(body.docs)}


@router.post("/retrieve", summary="Retrieve docs for queries (the memory contract)",
             response_model=list[RetrieveResult], responses=_ERRORS)
def retrieve(project_id: str, body: RetrieveBody, state: ServerState = Depends(get_state)) -> list[Retrieved]:
    mem, pid = _facade(project_id, state)
    # A project without a store answers as an empty one would, and gets none created.
    return mem.retrieve(pid, body.queries, body.num_to_retrieve, if_exists=True)


@router.post("/delete", summary="Delete docs by exact text (the memory contract)", responses=_ERRORS)
def delete(project_id: str, body: DocsBody, state: ServerState = Depends(get_state)) -> dict[str, Any]:
    mem, pid = _facade(project_id, state)
    return {"project": pid, "deleted": mem.delete(pid, body.docs)}


@router.post("/edit", summary="Replace one doc, named by its exact text (recorded; see /docs/{doc}/edit)",
             responses={**_ERRORS, **error_responses(404, e404="no doc has exactly the old text")})
def edit(project_id: str, body: EditBody, request: Request,
         state: ServerState = Depends(get_state)) -> dict[str, Any]:
    curator, pid = _curator(project_id, state)
    done = curator.edit(pid, body.old, body.new, who(request))
    # Tickets that indexed the old text now own the new one, so `middle revert` deletes the edit.
    return {"project": pid, "old": body.old, "new": done.doc, "change": done.change}


# -- curation (memory.curation.Curator): DOC is 4+ characters of a doc's id ----------------------

_DOC_ERRORS = {**_ERRORS, **error_responses(404, e404="no doc has that id")}


def _curator(project_id: str, state: ServerState) -> tuple[Any, str]:
    pid = checked_project(project_id)
    state.memory()  # MemoryOff (503) first
    with state.runs.build_lock:  # Services builds its parts lazily, not thread-safely
        return state.services.curator(), pid


def client_gone(request: Request) -> Callable[[], bool]:
    """Whether the client of this route (run in a worker thread) has closed its connection: its
    answer would reach no one, so long work stops rather than hold the server."""
    def gone() -> bool:
        return bool(anyio.from_thread.run(request.is_disconnected))
    return gone


@router.post("/docs", summary="Add one doc by hand (recorded)", responses=_NEW_ERRORS)
def add_doc(project_id: str, body: DatedTextBody, request: Request, create: bool = _CREATE,
            state: ServerState = Depends(get_state)) -> dict[str, Any]:
    curator, pid = _curator(project_id, state)
    _known(state, curator.facade, pid, create)
    return {"project": pid, **curator.add(pid, body.text, who(request), valid_until=body.valid_until,
                                          option="valid_until").shown(curator.facade, pid)}


@router.get("/docs/{doc}", summary="One doc: provenance, supersede links, pin, changes",
            responses=_DOC_ERRORS)
def show_doc(project_id: str, doc: str, state: ServerState = Depends(get_state)) -> dict[str, Any]:
    from orchestrator.memory.curation import change_ids, describe_change, origin_line

    curator, pid = _curator(project_id, state)
    shown = curator.show(pid, doc)
    ids = curator.facade.short_ids(pid, change_ids(shown["changes"]))
    return {**shown, "from": origin_line(shown),
            "changes": [{**c, "text": describe_change(c, ids)} for c in shown["changes"]],
            "uses": usage_by_doc(state.store.memory_usage(pid)["by_memory"],
                                 shown["changes"]).get(shown["id"][:DOC_ID_CHARS])}


@router.post("/docs/{doc}/edit", summary="Change a doc's text (re-indexed alone; recorded, undoable)",
             responses=_DOC_ERRORS)
def edit_doc(project_id: str, doc: str, body: DatedTextBody, request: Request,
             state: ServerState = Depends(get_state)) -> dict[str, Any]:
    curator, pid = _curator(project_id, state)
    if body.valid_until is not None:  # the validity first: the edit carries it to the new text
        done = curator.set_valid_until(pid, doc, body.valid_until, who(request), option="valid_until")
        if body.text == done.doc:  # the same text: only the validity changes
            return {"project": pid, **done.shown(curator.facade, pid)}
        doc = done.doc
    return {"project": pid, **curator.edit(pid, doc, body.text, who(request)).shown(curator.facade, pid)}


@router.post("/docs/{doc}/supersede", summary="Replace a doc with new text, keeping it as history",
             responses=_DOC_ERRORS)
def supersede_doc(project_id: str, doc: str, body: TextBody, request: Request,
                  state: ServerState = Depends(get_state)) -> dict[str, Any]:
    curator, pid = _curator(project_id, state)
    return {"project": pid, **curator.supersede(pid, doc, body.text, who(request)).shown(curator.facade, pid)}


@router.post("/docs/{doc}/pin", summary="Pin a doc: always in the agent's memories", responses=_DOC_ERRORS)
def pin_doc(project_id: str, doc: str, request: Request,
            state: ServerState = Depends(get_state)) -> dict[str, Any]:
    curator, pid = _curator(project_id, state)
    return {"project": pid, **curator.pin(pid, doc, who(request), True).shown(curator.facade, pid)}


@router.post("/docs/{doc}/unpin", summary="Unpin a doc", responses=_DOC_ERRORS)
def unpin_doc(project_id: str, doc: str, request: Request,
              state: ServerState = Depends(get_state)) -> dict[str, Any]:
    curator, pid = _curator(project_id, state)
    return {"project": pid, **curator.pin(pid, doc, who(request), False).shown(curator.facade, pid)}


@router.post("/docs/{doc}/forget", summary="Delete a doc (recorded: undo puts it back)",
             responses=_DOC_ERRORS)
def forget_doc(project_id: str, doc: str, request: Request,
               state: ServerState = Depends(get_state)) -> dict[str, Any]:
    curator, pid = _curator(project_id, state)
    return {"project": pid, **curator.forget(pid, doc, who(request)).shown(curator.facade, pid)}


@router.get("/changes", summary="Every change made to the project's memory, newest first",
            responses=_ERRORS)
def changes(project_id: str, limit: int = Query(100, ge=1, le=1000),
            state: ServerState = Depends(get_state)) -> dict[str, Any]:
    curator, pid = _curator(project_id, state)
    return {"project": pid, "changes": curator.changes(pid, limit)}


@router.post("/changes/{change}/undo", summary="Take one change back (recorded as a change)",
             responses={**_ERRORS, **error_responses(404, e404="no change has that number")})
def undo(project_id: str, change: int, request: Request,
         state: ServerState = Depends(get_state)) -> dict[str, Any]:
    curator, pid = _curator(project_id, state)
    return {"project": pid, **curator.undo(pid, change, who(request)).shown(curator.facade, pid)}


@router.get("/docs", summary="The project's docs a page at a time, filtered and sorted, with "
            "their tickets, author, pin, supersede links and usage", responses=_ERRORS)
def docs(project_id: str, state: ServerState = Depends(get_state),
         limit: int = Query(DEFAULT_PAGE, ge=1, le=MAX_PAGE, description="Docs per page."),
         cursor: str | None = Query(None, description="The previous page's `next_cursor`."),
         sort: str = Query("oldest", description="oldest (the store's order, the default), newest, "
                           "recalled (most first) or used (most first)."),
         source: str | None = Query(None, description="ticket, commit, file, transcript, hand, api, "
                                    "supersede or unknown."),
         ticket: str | None = Query(None, description="Only docs this ticket indexed."),
         author: str | None = Query(None, description="Only docs by someone whose name contains this."),
         since: str | None = Query(None, description="Only docs dated this day (YYYY-MM-DD) or later."),
         until: str | None = Query(None, description="Only docs dated this day (YYYY-MM-DD) or earlier."),
         pinned: str | None = Query(None, description="true or false."),
         superseded: str | None = Query(None, description="true (history) or false (live)."),
         expired: str | None = Query(None, description="true (past their valid_until) or false (still valid)."),
         never_used: str | None = Query(None, description="true: only docs the agent never used."),
         ) -> dict[str, Any]:
    mem, pid = _facade(project_id, state)
    query = DocQuery.parse(limit=limit, cursor=cursor, sort=sort, source=source, ticket=ticket,
                           author=author, since=since, until=until, pinned=pinned,
                           superseded=superseded, expired=expired, never_used=never_used)
    catalog = project_catalog(state, mem, pid)  # empty, creating nothing, without a store
    shown = catalog.page(query)
    return {"project": pid, "backend": mem.backend_name, "total": len(catalog.rows),
            "count": shown["matched"], "filters": query.filters(), "sort": query.sort,
            "limit": query.limit, **shown}


def project_catalog(state: ServerState, mem: MemoryFacade, pid: str) -> Catalog:
    """The project's docs joined with their states, ticket records, authors and usage: built
    once, then kept and caught up with each write (memory.catalog.catch_up: the docs the
    project's change log names since, from this process or any other, on any machine for a
    store in the database), so the page after a change costs about what the page before it did."""
    with state.catalog_lock:
        lock = state.catalog_locks.setdefault(pid, threading.Lock())
    with lock:  # one request catches a project's catalog up; the others then find it current
        kept = state.catalogs.get(pid)
        if kept is not None and catch_up(kept, mem, state.store, pid):
            return kept
        catalog = build_catalog(mem, state.store, pid)
        state.catalogs[pid] = catalog
        return catalog


@router.get("/search", summary="What recall returns for a query, with scores (and why, with explain)",
            responses=_ERRORS)
def search(project_id: str, q: str = Query(..., description="The query."),
           k: int = Query(5, ge=1, le=100, description="How many docs."),
           explain: bool = Query(False, description="Add each doc's signals and `why`, the line "
                                 "that says what put it there."),
           as_of: str | None = Query(None, description="What memory said then (YYYY-MM-DD: that "
                                     "day's end, UTC; or a time): the docs held then and not "
                                     "superseded, deleted or expired by then (`middle memory "
                                     "search --as-of`)."),
           state: ServerState = Depends(get_state)) -> dict[str, Any]:
    mem, pid = _facade(project_id, state)
    return search_results(state, mem, pid, q, k, explain=explain, as_of=as_of)


def search_results(state: ServerState, mem: MemoryFacade, pid: str, q: str, k: int,
                   explain: bool = False, as_of: str | None = None) -> dict[str, Any]:
    """The hits of a search; with `as_of` (a date) what memory said then, as the CLI's
    `search --as-of` finds it (memory.asof), plus `as_of` (the instant) and `held_then`."""
    then: dict[str, Any] = {}
    if as_of is not None and as_of.strip():
        from orchestrator.memory.asof import search_as_of

        curator, _ = _curator(pid, state)
        at, held, result = search_as_of(curator, pid, q, as_of, k)
        results, then = [result], {"as_of": at, "held_then": held}
    else:
        results = mem.retrieve(pid, [q], k, if_exists=True)
    sources = _with_sources(state, pid)
    marks = {m["doc"]: m["by"] for r in results for m in r.get("superseded", [])}
    ids = mem.short_ids(pid, [doc_id(d) for r in results for d in r["docs"]])  # one lookup for all
    hits = []
    for r in results:
        why = mem.explain(pid, q, r, {d: ids[doc_id(d)] for d in r["docs"]}) if explain and r["docs"] else []
        for pos, (d, s) in enumerate(zip(r["docs"], r["doc_scores"])):
            hit: dict[str, Any] = {"doc": d, "id": ids[doc_id(d)], "score": s,
                                   "tickets": sources.get(d, []),
                                   "superseded_by": (ids[doc_id(r["docs"][marks[pos]])]
                                                     if pos in marks else None)}
            if why:
                hit["why"] = why[pos]["why"]
                hit["signals"] = {key: value for key, value in why[pos].items() if key not in ("why", "id")}
            hits.append(hit)
    return {"project": pid, "backend": mem.backend_name, "recall": mem.backend_cls.recall,
            "query": q, "results": hits, **then}


@router.get("/stats", summary="Backend, doc count, store size on disk and last write", responses=_ERRORS)
def stats(project_id: str, state: ServerState = Depends(get_state)) -> dict[str, Any]:
    mem, pid = _facade(project_id, state)
    # The board's catalog, caught up by the change log, counts the docs: listing a store of
    # 100,000 on every call would cost what the paged board was built to avoid.
    rows = project_catalog(state, mem, pid).rows if mem.has_store(pid) else None
    return memory_stats(mem, pid, rows)


def memory_stats(mem: MemoryFacade, pid: str, docs: Sequence[Any] | None = None) -> dict[str, Any]:
    """The project's memory in numbers; `docs`: its docs when the caller has listed them already."""
    store = mem.store_dir(pid)
    exists = mem.has_store(pid)
    size, last = _disk_usage(store) if exists else (0, None)
    count = len(docs if docs is not None else mem.list_docs(pid)) if exists else 0
    return {"project": pid, "backend": mem.backend_name, "recall": mem.backend_cls.recall,
            "docs": count, "store_bytes": size,
            "last_write": last, "store_dir": mem.where(pid)}  # or the database


def _disk_usage(root: Path) -> tuple[int, str | None]:
    total, newest = 0, 0.0
    for path in root.rglob("*"):
        try:
            st = path.stat()
        except OSError:  # a temp file renamed away while we looked
            continue
        if path.is_file():
            total += st.st_size
        newest = max(newest, st.st_mtime)
    last = datetime.fromtimestamp(newest, timezone.utc).isoformat(timespec="seconds") if newest else None
    return total, last
