"""What the local fakes of remote services share (the Messages API here, GitHub in
orchestrator.testing.fake_github): a threaded HTTP server on 127.0.0.1 that starts and stops
with its owner, and the record of one request."""

from __future__ import annotations

import gzip
import json
import socket
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeHandler", "LocalServer", "RequestRecord", "bind"]


@dataclass
class RequestRecord:
    """One request as a fake saw it: method, path, query, headers (as sent), body (JSON when it parses)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


class FakeHandler(BaseHTTPRequestHandler):
    """What every fake's request handler shares: keep-alive, quiet, each verb to `_handle`, the
    body read (gzip undone, JSON when it parses), JSON replies. `bind` gives it its fake."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs expect
    timeout = 120  # an idle keep-alive connection frees its thread eventually
    json_type = "application/json"

    def log_message(self, format: str, *args: Any) -> None:  # stdlib logs to stderr; stay quiet
        pass

    def do_POST(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        raise NotImplementedError

    def _read_body(self) -> tuple[bytes, Any]:
        """The raw body (gzip undone) and its JSON value (the text when it is not JSON; None if empty)."""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            raw = gzip.decompress(raw)
        try:
            return raw, (json.loads(raw) if raw else None)
        except ValueError:
            return raw, raw.decode("utf-8", "replace")

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", self.json_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


    def _send_raw(self, status: int, raw: str, cut: bool, headers: dict[str, str] | None = None) -> None:
        """A broken answer (replies.broken_reply): `raw` as is; with `cut`, the connection closed
        before the Content-Length promised is reached, as when a proxy or the server dies mid-reply."""
        data = raw.encode()
        self.send_response(status)
        self.send_header("Content-Type", self.json_type)
        self.send_header("Content-Length", str(len(data) + (1000 if cut else 0)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        if cut:
            self.wfile.flush()
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    """A client that hangs up mid-request (a coding agent killed at its turn's timeout, an SDK
    giving up on a retry) is the client's business: the stdlib prints its traceback to stderr,
    where it reads as the fake's failure in the user's terminal. Any other error still prints."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.open_connections: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self.open_connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self.open_connections.discard(request)
        super().shutdown_request(request)

    def close_open_connections(self) -> None:
        """Hang up on every client still connected (a keep-alive connection, a reply in progress),
        as a server that goes away does: its handler threads would otherwise go on answering."""
        with self._open_lock:
            sockets = list(self.open_connections)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # reset, broken pipe, aborted
            return
        super().handle_error(request, client_address)


def bind(handler: type[BaseHTTPRequestHandler], fake: Any) -> type[BaseHTTPRequestHandler]:
    """`handler` as a class whose requests see `fake` (the server makes one handler per request)."""
    return type(handler.__name__, (handler,), {"fake": fake})


class LocalServer:
    """Serves `_handler_class()` on 127.0.0.1 in daemon threads; `with fake:` starts and stops it."""

    _name = "local-fake"

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self._address = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def start(self) -> Any:
        if self._server is None:
            self._server = _Server(self._address, self._handler_class())
            # Handler threads may sit in a slow reply or an idle keep-alive read; they must
            # never keep stop() (or interpreter exit) waiting.
            self._server.daemon_threads = True
            self._server.block_on_close = False
            self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name=self._name,
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.close_open_connections()
            self._server = None
            self._thread = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def _port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"the {self._name} is not running; call start() first")
        return self._server.server_port
