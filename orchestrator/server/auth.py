"""The token gate, the cross-site check and the CSRF check, as one ASGI middleware.

- Without a token (loopback only): any local client may call, but a browser page of another site
  may not change state (Origin / Sec-Fetch-Site), and the Host must be a loopback name, so a DNS
  rebinding page cannot reach the API through its own host name.
- With a token (MIDDLE_API_TOKEN, or the named ones of `[server] tokens`): every /api route,
  page and the OpenAPI docs need one, as `Authorization: Bearer TOKEN` or the session cookie the
  login form sets (SameSite=Strict, HttpOnly). A state-changing request made with the cookie must
  also carry the CSRF token the pages embed (header X-CSRF-Token). Static files, the login form
  and share links with their key are public. The name of the token a request came with is put
  in its scope (`scope["state"]["token_name"]`): a memory change is recorded as made by it.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from typing import Any
from urllib.parse import quote, urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from orchestrator.server.errors import error_response

SESSION_COOKIE = "middle_session"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PUBLIC_PREFIXES = ("/static/", "/static-offline-docs/", "/login", "/favicon.ico")
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost: addresses only this machine can reach."""
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _mac(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def session_value(token: str) -> str:
    """The cookie value: derived from the token, so the cookie never holds the token itself."""
    return _mac(token, "session")


def csrf_token(token: str | None) -> str:
    return _mac(token, "csrf") if token else ""


def share_key(token: str | None, ticket_id: str) -> str:
    """The key of a ticket's read-only share link (empty without a token: links need none)."""
    return _mac(token, f"share:{ticket_id}")[:32] if token else ""


def safe_next(target: str | None) -> str:
    """Only a local path is a place to go back to after login (no open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def cross_site_reason(request: Request) -> str | None:
    """Why a state-changing request looks like it came from another site's page, or None."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site in ("cross-site", "same-site"):
        return f"the browser says it comes from another site (Sec-Fetch-Site: {fetch_site})"
    origin = request.headers.get("origin")
    if origin is not None:
        if origin == "null":
            return "its Origin is 'null' (a sandboxed or local page)"
        host = request.headers.get("host", "")
        if urlsplit(origin).netloc.lower() != host.lower():
            return f"its Origin {origin} is not this server ({host})"
    return None


def _error(status: int, message: str, **headers: str) -> Response:
    return error_response(status, message, headers=headers)


UNNAMED = "MIDDLE_API_TOKEN"  # the name of the one token of old (any holder of it)
TOKEN_NAME = "token_name"  # the request scope's state key: which named token signed the request
TOKEN_SECRET = "token_secret"  # ... and that token (the session's CSRF token derives from it)


def match_token(tokens: dict[str, str], given: str) -> str | None:
    """The name of the token `given` is (compared in constant time with every one), or None."""
    found = None
    for name, secret in tokens.items():
        if hmac.compare_digest(given.encode(), secret.encode()):
            found = name
    return found


class AuthMiddleware:
    """Applies the rules in the module docstring to every HTTP request. `tokens`: name -> token
    (`token`: the unnamed MIDDLE_API_TOKEN, named UNNAMED)."""

    def __init__(self, app: Any, token: str | None = None, tokens: dict[str, str] | None = None):
        self.app = app
        self.tokens = {**({UNNAMED: token} if token else {}), **(tokens or {})}
        self.token = next(iter(self.tokens.values()), None)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._check(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _check(self, request: Request) -> Response | None:
        path, method = request.url.path, request.method
        unsafe = method not in SAFE_METHODS
        if not self.token:
            host = urlsplit("//" + request.headers.get("host", "")).hostname or ""
            if not is_loopback(host):
                return _error(403, f"this server answers only on a loopback host name, not {host!r}: "
                                   "open it as http://127.0.0.1:PORT (set MIDDLE_API_TOKEN to serve "
                                   "other addresses)")
        if unsafe and (why := cross_site_reason(request)):
            return _error(403, f"cross-site request refused: {why}")
        if not self.token or path.startswith(PUBLIC_PREFIXES):
            return None
        if method in ("GET", "HEAD") and self._share_link_ok(request):
            return None
        bearer = request.headers.get("authorization", "")
        if bearer[:7].lower() == "bearer " and (name := match_token(self.tokens, bearer[7:].strip())):
            self._signed(request, name)
            return None  # not sent automatically by a browser, so no CSRF check is needed
        cookie = request.cookies.get(SESSION_COOKIE, "")
        name = match_token({n: session_value(t) for n, t in self.tokens.items()}, cookie) if cookie else None
        if name is not None:
            if unsafe and not hmac.compare_digest(request.headers.get(CSRF_HEADER, ""),
                                                  csrf_token(self.tokens[name])):
                return _error(403, "missing or wrong CSRF token: send the X-CSRF-Token header the "
                                   "dashboard pages carry (or use Authorization: Bearer TOKEN)")
            self._signed(request, name)
            return None
        if path.startswith("/api/") or path in ("/openapi.json",) or unsafe:
            if bearer[:7].lower() == "bearer ":  # a token was sent: say it is the wrong one, not that none was
                return _error(401, "that token is not one of this server's: send the server's "
                                   "MIDDLE_API_TOKEN (or a [server] tokens one) as `Authorization: Bearer TOKEN`",
                              **{"WWW-Authenticate": 'Bearer error="invalid_token"'})
            return _error(401, "this server needs a token: send `Authorization: Bearer TOKEN` "
                               "(the server's MIDDLE_API_TOKEN), or sign in at /login",
                          **{"WWW-Authenticate": "Bearer"})
        target = path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)

    def _signed(self, request: Request, name: str) -> None:
        request.scope.setdefault("state", {}).update({TOKEN_NAME: name, TOKEN_SECRET: self.tokens[name]})

    def _share_link_ok(self, request: Request) -> bool:
        parts = request.url.path.strip("/").split("/")
        if len(parts) != 3 or parts[:2] != ["share", "tickets"]:
            return False
        key = request.query_params.get("key", "")
        return bool(key) and hmac.compare_digest(key, share_key(self.token, parts[2]))
