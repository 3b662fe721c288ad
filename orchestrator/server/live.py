"""Serve the app from a background thread on 127.0.0.1 (tests, notebooks, embedding in a program)."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

from orchestrator.server.serve import bind, url_of

STARTUP_TIMEOUT_S = 60.0


class ServerThread:
    """`with ServerThread(app) as server:` serves `app` at `server.url` until the block ends."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0):
        self.app = app
        self.sock = bind(host, port)
        self.url = url_of(self.sock).rstrip("/")
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="middle-serve", daemon=True)

    def start(self) -> "ServerThread":
        self.thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server at {self.url} did not start; see the log above")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        state = getattr(self.app.state, "middle", None)
        if state is not None:
            state.stopping.set()  # live event streams end, so shutdown need not wait for them
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()

    def __enter__(self) -> "ServerThread":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
