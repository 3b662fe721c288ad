"""Fixtures for `middle serve` tests: a sample project, and the real app served by uvicorn on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from orchestrator.config.settings import Config
from orchestrator.fake_api.pytest_fixtures import claude_cli  # noqa: F401
from orchestrator.server import create_app
from orchestrator.server.live import ServerThread
from server_helpers import Served, make_project


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """serve(config, fake=True, token=None, services=None) -> Served; all stopped at the end."""
    started: list[Served] = []

    def start(config: Config, **kwargs: Any) -> Served:
        kwargs.setdefault("fake", True)
        app = create_app(config, **kwargs)
        served = Served(ServerThread(app).start(), app)
        started.append(served)
        return served

    yield start
    for served in reversed(started):
        served.close()


@pytest.fixture
def project(tmp_path: Path) -> Config:
    return make_project(tmp_path)


@pytest.fixture
def server(serve: Callable[..., Served], project: Config) -> Served:
    return serve(project)
