"""The dashboard's pages: board, ticket (live), read-only share view, memory, and the login form."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from orchestrator.errors import MemoryStoreError, MiddleError
from orchestrator.server.auth import (
    SESSION_COOKIE,
    TOKEN_NAME,
    TOKEN_SECRET,
    csrf_token,
    match_token,
    safe_next,
    session_value,
)
from orchestrator.server.memory_api import _curator, memory_stats, project_catalog, search_results
from orchestrator.server.state import ServerState, checked_project, get_state, ticket_or_404
from orchestrator.server.tickets_api import ticket_detail

router = APIRouter(include_in_schema=False)

# Board columns, in the order a ticket moves through them.
STATUSES = ("pending", "running", "complete", "conflict", "merged", "failed", "interrupted",
            "reverted", "discarded")


def page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    state = get_state(request)
    signed = getattr(request.state, TOKEN_SECRET, None)  # the session's own token (server.auth)
    base = {"csrf": csrf_token(signed or state.token), "token_on": bool(state.token), "fake": state.fake,
            "signed_in_as": getattr(request.state, TOKEN_NAME, None)}
    if "nav_projects" not in context:  # the login and share pages show no projects
        base["nav_projects"] = state.project_ids()
    return request.app.state.templates.TemplateResponse(request, name, {**base, **context},
                                                        status_code=status)


def board_context(state: ServerState, project: str | None) -> dict[str, Any]:
    problems, folder_problem = state.sync_folder()
    store = state.store
    stats = store.ticket_stats()
    active = state.runs.active()
    cards: dict[str, list[dict[str, Any]]] = {s: [] for s in STATUSES}
    everything = store.list_tickets()  # a dependency may be a ticket of another project
    blocked = _dependency_problems(everything)
    for ticket in everything:
        if project and ticket.project_id != project:
            continue
        data = {**ticket.to_dict(), "turns": 0, "cost_usd": 0.0, "offline_runs": 0,
                "last_event_at": None, **stats.get(ticket.id, {}), "running_here": ticket.id in active,
                "problem": blocked.get(ticket.id)}
        cards.setdefault(data["status"], []).append(data)
    for column in cards.values():  # most recently active first
        column.sort(key=lambda c: c["last_event_at"] or c["updated_at"], reverse=True)
    totals = [t for t in store.project_totals() if not project or t["project"] == project]
    return {"columns": list(cards.items()), "totals": totals, "project": project or "",
            "projects": state.project_ids(with_memory=False),
            "problems": [str(p) for p in problems] + ([folder_problem] if folder_problem else []),
            "after": store.last_event_id(), "default_project": _default_project(state)}


def _dependency_problems(tickets: list[Any]) -> dict[str, str]:
    """Per ticket that can never start as written (a dependency that names no ticket, a cycle): why."""
    from tickets.deps import check_dependencies

    blocked: dict[str, list[str]] = {}
    for problem in check_dependencies(tickets):
        for tid in problem.ticket_ids:
            blocked.setdefault(tid, []).append(problem.message)
    return {tid: " ".join(messages) for tid, messages in blocked.items()}


def _default_project(state: ServerState) -> str:
    cfg = state.config
    return cfg.project.id or cfg.resolve(cfg.project.path).name


@router.get("/", response_class=HTMLResponse)
def board(request: Request, project: str | None = Query(None),
          state: ServerState = Depends(get_state)) -> HTMLResponse:
    return page(request, "board.html", board_context(state, project))


@router.get("/board/fragment", response_class=HTMLResponse)
def board_fragment(request: Request, project: str | None = Query(None),
                   state: ServerState = Depends(get_state)) -> HTMLResponse:
    return page(request, "_board_fragment.html", board_context(state, project))


def ticket_context(state: ServerState, ticket_id: str, readonly: bool, sync: bool = True) -> dict[str, Any]:
    ticket = state.ticket(ticket_id) if sync else ticket_or_404(state.store, ticket_id)
    detail = ticket_detail(state, ticket)
    first = None
    if detail["runs"]:  # replay the latest run's events from its start, then follow
        events = state.store.list_events(run_id=detail["runs"][0]["id"], limit=1)
        first = events[0]["id"] if events else None
    after = first - 1 if first else state.store.last_event_id(ticket_id=ticket_id)
    return {"t": detail, "readonly": readonly, "after": after, "diff": _diff(state, detail)}


def _diff(state: ServerState, detail: dict[str, Any]) -> dict[str, Any] | None:
    """The ticket's change per file for the page (None when it has no branch of its own)."""
    runs = detail["runs"]
    if not runs or not runs[0].get("branch") or detail["status"] == "running":
        return None
    from orchestrator.workspace import split_patch

    try:
        result = state.review().diff(detail["id"])
    except MiddleError as exc:  # e.g. a discarded ticket's commits are gone: say so on the page
        return {"error": str(exc), "files": []}
    patches = {f["path"]: f["patch"] for f in split_patch(result.pop("text"))}
    result["files"] = [{**f, "patch": patches.get(f["path"], "")} for f in result["files"]]
    return result


@router.get("/tickets/{ticket_id}", response_class=HTMLResponse)
def ticket_page(request: Request, ticket_id: str, state: ServerState = Depends(get_state)) -> HTMLResponse:
    return page(request, "ticket.html", ticket_context(state, ticket_id, readonly=False))


@router.get("/tickets/{ticket_id}/fragment", response_class=HTMLResponse)
def ticket_fragment(request: Request, ticket_id: str, state: ServerState = Depends(get_state)) -> HTMLResponse:
    return page(request, "_ticket_fragment.html", ticket_context(state, ticket_id, readonly=False, sync=False))


@router.get("/share/tickets/{ticket_id}", response_class=HTMLResponse)
def share_page(request: Request, ticket_id: str, state: ServerState = Depends(get_state)) -> HTMLResponse:
    context = ticket_context(state, ticket_id, readonly=True)
    response = page(request, "ticket.html", {**context, "csrf": "", "token_on": False, "nav_projects": []})
    response.headers["X-Robots-Tag"] = "noindex"
    return response


@router.get("/memory", response_class=HTMLResponse)
def memory_index(request: Request, state: ServerState = Depends(get_state)) -> Response:
    state.sync_folder()
    projects = state.project_ids()
    if len(projects) == 1:
        return RedirectResponse(f"/projects/{projects[0]}/memory", status_code=303)
    return page(request, "memory_index.html", {"projects": projects,
                                               "memory_on": state.memory_or_none() is not None})


FILTERS = ("source", "ticket", "author", "since", "until", "pinned", "superseded", "expired", "never_used")
CHANGES_SHOWN = 20  # the newest changes on the page (`middle memory history` lists them all)


@router.get("/projects/{project_id}/memory", response_class=HTMLResponse)
def memory_page(request: Request, project_id: str, q: str | None = Query(None),
                k: int = Query(5, ge=1, le=100), as_of: str | None = Query(None),
                state: ServerState = Depends(get_state)) -> HTMLResponse:
    """One page of the project's docs (filtered, sorted and cut server-side: the page stays the
    same size at 100,000 docs as at 20), a search over the whole store whose hits carry the
    same actions, and the newest changes."""
    from orchestrator.memory.catalog import SORTS, DocQuery
    from orchestrator.memory.curation import SOURCE_KINDS, CurationError, change_ids, describe_change
    from orchestrator.memory.timeline import DateError

    pid = checked_project(project_id)
    given = {key: request.query_params.get(key) for key in (*FILTERS, "sort", "limit", "cursor")}
    context: dict[str, Any] = {"pid": pid, "q": q or "", "k": k, "as_of": as_of or "", "search": None, "docs": [],
                               "stats": None, "off": None, "failure": None, "changes": [], "usage": {},
                               "kinds": SOURCE_KINDS, "sorts": SORTS, "counts": {"all": 0},
                               "given": {key: value or "" for key, value in given.items()},
                               "matched": 0, "next_url": None, "first_url": None}
    if state.memory_or_none() is None:
        context["off"] = str(_off())
        return page(request, "memory.html", context)
    mem = state.memory()
    status = 200
    try:
        query = DocQuery.parse(**given)
        catalog = project_catalog(state, mem, pid)
        context["stats"] = memory_stats(mem, pid, catalog.rows)
        context["usage"] = state.store.memory_usage(pid)["by_backend"]
        context["counts"] = catalog.counts()
        shown = catalog.page(query)
        context["docs"], context["matched"] = shown["docs"], shown["matched"]
        kept = {key: value for key, value in given.items() if value and key not in ("cursor",)}
        if q:
            kept.update(q=q, k=str(k), **({"as_of": as_of} if as_of else {}))
        if shown["next_cursor"]:
            context["next_url"] = f"?{urlencode({**kept, 'cursor': shown['next_cursor']})}"
        if query.cursor:
            context["first_url"] = f"?{urlencode(kept)}"
        changes = _curator(pid, state)[0].undoable(pid, state.store.memory_changes(pid, limit=CHANGES_SHOWN),
                                                  catalog.has, catalog.states)
        ids = {ident: catalog.ident(ident) for ident in change_ids([c for c, _ in changes])}
        context["changes"] = [{**c, "text": describe_change(c, ids), "undoable": undoable} for c, undoable in changes]
        if q and q.strip():
            found = search_results(state, mem, pid, q, k, explain=True, as_of=as_of)
            # each hit as a listed doc (its actions, author, ticket links), with its score and why
            found["results"] = [{**h, **catalog.describe(h["doc"])} for h in found["results"]]
            context["search"] = found
    except (CurationError, DateError) as exc:  # a bad filter, date or cursor: said on the page
        context["failure"], status = str(exc), 400
    except MemoryStoreError as exc:  # shown on the page, like any other failure
        context["failure"], status = str(exc), 503
    return page(request, "memory.html", context, status=status)


def _off() -> Exception:
    from orchestrator.server.errors import memory_off

    return memory_off()


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = Query("/")) -> Response:
    state = get_state(request)
    if not state.token:
        return RedirectResponse(safe_next(next), status_code=303)
    return page(request, "login.html", {"next": safe_next(next), "error": None, "csrf": "",
                                        "token_on": False, "nav_projects": []})


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    state = get_state(request)
    form = await request.form()
    target = safe_next(str(form.get("next") or "/"))
    given = str(form.get("token") or "")
    name = match_token(state.tokens, given.strip()) if state.tokens else None
    if name is None:
        return page(request, "login.html", {"next": target, "error": "That token is not this server's "
                    "MIDDLE_API_TOKEN: check it and try again.", "csrf": "", "token_on": False,
                    "nav_projects": []}, status=401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(SESSION_COOKIE, session_value(state.tokens[name]), httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")
    return response


@router.post("/logout")
def logout() -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
