"""The memory HTTP API: the memory contract's index / retrieve / delete, plus list, search, edit and stats.

Arguments go to the memory facade as they came, so the API refuses exactly what the facade
refuses, with the facade's message. A read-only call on a project that has no store yet answers
empty without creating one.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.memory.facade import DOC_ID_CHARS, doc_id
from orchestrator.server.errors import NotFound, error_responses
from orchestrator.server.state import ServerState, checked_project, get_state
from tickets.queries import DocSource

if TYPE_CHECKING:
    from orchestrator.memory.facade import MemoryFacade
    from orchestrator.plugins.memory_backend import RetrieveResult as Retrieved

router = APIRouter(prefix="/api/projects/{project_id}/memory", tags=["memory"])

# Every memory route: a bad project id or body is a 400 (a doc over [memory] max_doc_chars, a
# query over max_query_chars too); a body over the server's limit a 413; memory off or a failing
# store a 503.
_ERRORS = error_responses(400, 413, 503, e400="e.g. a project id with a '/', docs that are not a "
                          "list of strings, a doc over [memory] max_doc_chars or a query over "
                          "[memory] max_query_chars", e503="memory is off, or the backend's store failed")


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


class RetrieveResult(BaseModel):
    question: str
    docs: list[str]
    doc_scores: list[float]


def _facade(project_id: str, state: ServerState) -> tuple[MemoryFacade, str]:
    pid = checked_project(project_id)  # a 400 naming the id, before any path is built
    return state.memory(), pid


def _with_sources(state: ServerState, pid: str) -> dict[str, list[DocSource]]:
    return state.store.doc_sources(pid)


@router.post("/index", summary="Index docs (the memory contract)", responses=_ERRORS)
def index(project_id: str, body: DocsBody, state: ServerState = Depends(get_state)) -> dict[str, Any]:
    mem, pid = _facade(project_id, state)
    mem.index(pid, body.docs, refuse_long=True)  # a client's doc is kept whole or refused
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


@router.post("/edit", summary="Replace one doc: delete the old text and index the new, in one call",
             responses={**_ERRORS, **error_responses(404, e404="no doc has exactly the old text")})
def edit(project_id: str, body: EditBody, state: ServerState = Depends(get_state)) -> dict[str, Any]:
    mem, pid = _facade(project_id, state)
    new = mem.prepare_doc(body.new, refuse_long=True)  # refused before anything is deleted
    if not mem.has_store(pid) or not mem.delete(pid, [body.old]):
        raise NotFound(f"no doc in project {pid!r} has exactly that text, so nothing was changed: "
                       "copy the exact text from the list")
    try:
        mem.index(pid, [new])
    except Exception:
        mem.index(pid, [body.old])  # put the old doc back: an edit never just loses a doc
        raise
    # Tickets that indexed the old text now own the new one, so `middle revert` deletes the edit.
    state.store.replace_memory_doc(pid, body.old, new)
    return {"project": pid, "old": body.old, "new": new}


@router.get("/docs", summary="Every doc in the project's memory, with the tickets that indexed it",
            responses=_ERRORS)
def docs(project_id: str, state: ServerState = Depends(get_state)) -> dict[str, Any]:
    mem, pid = _facade(project_id, state)
    texts = mem.list_docs(pid)  # [] without creating a store when the project has none
    sources = _with_sources(state, pid)
    return {"project": pid, "backend": mem.backend_name, "count": len(texts),
            "docs": [{"id": doc_id(t)[:DOC_ID_CHARS], "text": t, "tickets": sources.get(t, [])}
                     for t in texts]}


@router.get("/search", summary="What recall returns for a query, with scores", responses=_ERRORS)
def search(project_id: str, q: str = Query(..., description="The query."),
           k: int = Query(5, ge=1, le=100, description="How many docs."),
           state: ServerState = Depends(get_state)) -> dict[str, Any]:
    mem, pid = _facade(project_id, state)
    return search_results(state, mem, pid, q, k)


def search_results(state: ServerState, mem: MemoryFacade, pid: str, q: str, k: int) -> dict[str, Any]:
    results = mem.retrieve(pid, [q], k, if_exists=True)
    sources = _with_sources(state, pid)
    hits = [{"doc": d, "score": s, "tickets": sources.get(d, [])}
            for r in results for d, s in zip(r["docs"], r["doc_scores"])]
    return {"project": pid, "backend": mem.backend_name, "recall": mem.backend_cls.recall,
            "query": q, "results": hits}


@router.get("/stats", summary="Backend, doc count, store size on disk and last write", responses=_ERRORS)
def stats(project_id: str, state: ServerState = Depends(get_state)) -> dict[str, Any]:
    mem, pid = _facade(project_id, state)
    return memory_stats(mem, pid)


def memory_stats(mem: MemoryFacade, pid: str, docs: list[str] | None = None) -> dict[str, Any]:
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
