"""Fault tests: what a fault probe tries (concurrent CLI calls, outages, kill -9, oversized
input), each against the real parts (git, SQLite, PostgreSQL, the HTTP server, the real Claude Code
CLI on the fake Messages API). They share the end-to-end and graph helpers (tests/e2e/e2e_helpers.py,
tests/graph/graph_helpers.py, tests/server/server_helpers.py)."""

import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from orchestrator.fake_api.pytest_fixtures import claude_cli, claude_env, fake_api  # noqa: F401

for helpers in ("e2e", "graph", "server"):
    where = str(Path(__file__).resolve().parents[1] / helpers)
    if where not in sys.path:
        sys.path.insert(0, where)


@pytest.fixture
def serve() -> Iterator[Callable[..., Any]]:
    """serve(config, ...) -> the real app on 127.0.0.1 (tests/server/server_helpers.serving)."""
    from server_helpers import serving

    with serving() as start:
        yield start
