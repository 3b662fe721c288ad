"""The ASGI app of `middle serve`: the memory API, the tickets API, run events, and the dashboard."""

from __future__ import annotations

import logging
import threading
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException

from orchestrator.config.settings import Config
from orchestrator.errors import MiddleError
from orchestrator.server import events_api, memory_api, memory_bulk_api, pages, tickets_api
from orchestrator.server.auth import UNNAMED, AuthMiddleware
from orchestrator.server.background_runs import RunManager
from orchestrator.server.body_limit import BodyLimit
from orchestrator.server.errors import MAX_BODY_BYTES, document_errors, error_response, status_for
from orchestrator.server.render import STATIC_DIR, make_templates
from orchestrator.server.state import ServerState
from orchestrator.services import Services

log = logging.getLogger("middle.server")

DESCRIPTION = """The memory API (`/api/projects/{project_id}/memory/index|retrieve|delete`,
plus list, search, edit and stats), the tickets API (list, create, run, resume, revert), and each
run's events, as JSON and live as Server-Sent Events. Every error is `{"error": "message"}` with
its status: 400 for a bad request (never 422), 404 for an unknown ticket, run or doc, 409 when
another run or the repository's state is in the way, 413 for a request body over 8 MiB (refused
before it is read), 503 when memory is off or a store failed. A memory doc over `[memory]
max_doc_chars` or a query over `max_query_chars` is a 400 naming the limit.
With MIDDLE_API_TOKEN set, send `Authorization: Bearer TOKEN`."""


def create_app(config: Config, *, services: Services | None = None, fake: bool = False,
               token: str | None = None, tokens: dict[str, str] | None = None,
               runs: RunManager | None = None,
               max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    """Build the app on one config. It owns (and closes at shutdown) the services it builds;
    services passed in stay the caller's to close. A request body over `max_body_bytes` is a
    413 before it is parsed (server/body_limit.py), so a client cannot make the server hold
    or parse more than that. `token`: the unnamed MIDDLE_API_TOKEN (named "MIDDLE_API_TOKEN"); `tokens`:
    name -> token (`[server] tokens`, read from the environment by `middle serve`)."""
    own = services is None
    named = {**({UNNAMED: token} if token else {}), **(tokens or {})}
    svc = services or Services(config, fake=fake)
    state = ServerState(config=config, services=svc, runs=runs or RunManager(svc),
                        token=next(iter(named.values()), None), tokens=named, fake=fake or svc.fake)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        _ = svc.store  # create the ticket database now: the first page then has something to read
        threading.Thread(target=state.runs.warm_up, name="middle-warm-up", daemon=True).start()
        yield
        state.stopping.set()
        stopped = state.runs.interrupt_all()
        if stopped:
            log.warning("stopped with runs in progress (%s): continue them with `middle resume`",
                        ", ".join(stopped))
        if own:
            svc.close()

    app = FastAPIOffline(title="middle-agent", version="1", description=DESCRIPTION, lifespan=lifespan,
                         static_url="/static-offline-docs",
                         swagger_ui_parameters={"validatorUrl": None})  # no call to an online validator
    app.state.middle = state
    app.state.templates = make_templates()
    app.add_middleware(AuthMiddleware, tokens=named)
    app.add_middleware(BodyLimit, limit=max_body_bytes)  # added last: it runs first
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    for module in (memory_api, memory_bulk_api, tickets_api, events_api, pages):
        app.include_router(module.router)
    _error_handlers(app)
    generate = app.openapi
    app.openapi = lambda: document_errors(generate())  # type: ignore[method-assign]
    return app


def _wants_html(request: Request) -> bool:
    """A page (not /api, not the OpenAPI document) answers an error as a page, unless the client
    asks for JSON only; the API always answers JSON."""
    if request.url.path.startswith(("/api/", "/openapi", "/static/")):
        return False
    accept = request.headers.get("accept", "")
    return "text/html" in accept or "application/json" not in accept


def _error(request: Request, status: int, message: str) -> Response:
    if _wants_html(request):
        templates = request.app.state.templates
        return templates.TemplateResponse(request, "error.html", {
            "status": status, "message": message, "csrf": "", "token_on": False, "fake": False,
            "nav_projects": []}, status_code=status)
    return error_response(status, message)


def _error_handlers(app: FastAPI) -> None:
    @app.exception_handler(MiddleError)
    async def middle_error(request: Request, exc: MiddleError) -> Response:
        return _error(request, status_for(exc), str(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        return _error(request, 400, validation_message(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = {404: f"nothing at {request.url.path}: see /docs for the API",
                   405: f"{request.method} is not allowed on {request.url.path}: see /docs"}.get(
            exc.status_code, str(exc.detail))
        return _error(request, exc.status_code, message)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return _error(request, 500, f"internal error ({type(exc).__name__}); the server log has the "
                                    "details")


def validation_message(errors: Any) -> str:
    """FastAPI's validation errors as one sentence: what was wrong where."""
    parts = []
    for err in errors:
        where = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        if err.get("type") == "json_invalid":
            return ("the request body is not valid JSON "
                    f"({err.get('ctx', {}).get('error', 'parse error')}): send a JSON object")
        if err.get("type") == "model_attributes_type":
            return "the request body must be a JSON object, e.g. {\"docs\": [\"text\"]}"
        if err.get("type") == "extra_forbidden":
            parts.append(f"unknown field {where!r}")
        elif err.get("type") == "missing":
            parts.append(f"{where} is required")
        else:
            parts.append(f"{where}: {err.get('msg')}")
    return "bad request: " + "; ".join(parts)


__all__ = ["create_app"]
