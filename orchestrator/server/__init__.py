"""`middle serve`: the memory HTTP API, the tickets API, live run events (SSE) and the web dashboard."""

from orchestrator.server.app import create_app

__all__ = ["create_app"]
