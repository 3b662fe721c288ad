"""Who a request is: the person a change or a run is recorded as (`[server] tokens` names them)."""

from __future__ import annotations

from fastapi import Request

from orchestrator.server.auth import SESSION_COOKIE, TOKEN_NAME
from orchestrator.server.state import ServerState, get_state


def who(request: Request) -> str:
    """Who a change is recorded as: the board (its login cookie) or an API client, and the
    person: the name of the token the request came with (`[server] tokens`; MIDDLE_API_TOKEN is
    "MIDDLE_API_TOKEN"), or, on a server without tokens (loopback only: this machine's user), the person
    the server runs as (git's user.name and user.email, else the login name)."""
    via = "board" if request.cookies.get(SESSION_COOKIE) or "text/html" in request.headers.get(
        "accept", "") or request.headers.get("x-middle-board") else "api"
    return f"{via} {person(request)}"


def person(request: Request) -> str:
    """The person alone (a run's starter, as `middle run` records git's user): the request's
    token's name, or on a server without tokens the person the server runs as."""
    name = getattr(request.state, TOKEN_NAME, None)
    return name if name is not None else _server_user(get_state(request))


def _server_user(state: ServerState) -> str:
    from orchestrator.memory.curation import cli_user

    if state.user is None:  # asked once: the person a server runs as does not change
        state.user = cli_user(state.config.root)
    return state.user
