"""The cap on request bodies: a 413 naming the limit, before anything reads or parses the body.

FastAPI's own `max_body_size` (Starlette's RequestBodyLimitMiddleware) counts the same way, but
answers every refused request with its own plain-text "Content Too Large", over whatever the
app answered: no limit said, and not the project's `{"error": message}` body. So this ASGI
middleware does the two checks itself:

- a declared `Content-Length` over the limit is answered at once, and the body is never read
  (uvicorn then closes the connection instead of reading the rest);
- a body sent without one (chunked) is counted as it comes: past the limit, the read raises
  `BodyTooLarge`, an HTTP 413 exception the app's error handler words (a route reads its whole
  body before it runs, so no memory call starts on a body over the limit).
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException

from orchestrator.server.errors import body_too_large, error_response


class BodyTooLarge(HTTPException):
    """A body that grew past the limit while it was read (413)."""

    def __init__(self, limit: int):
        super().__init__(status_code=413, detail=body_too_large(limit))


class BodyLimit:
    """Refuses request bodies over `limit` bytes (see the module docstring)."""

    def __init__(self, app: Any, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.limit:
            await error_response(413, body_too_large(self.limit),
                                 headers={"Connection": "close"})(scope, receive, send)
            return
        received = 0

        async def counted() -> Any:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, counted, send)
