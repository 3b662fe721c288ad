"""Fixtures for `middle serve` tests: a sample project, and the real app served by uvicorn on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest
from server_helpers import Served, make_project, serving

from orchestrator.config.settings import Config
from orchestrator.fake_api.pytest_fixtures import claude_cli  # noqa: F401


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """serve(config, fake=True, token=None, services=None) -> Served; all stopped at the end."""
    with serving() as start:
        yield start


@pytest.fixture
def project(tmp_path: Path) -> Config:
    return make_project(tmp_path)


@pytest.fixture
def server(serve: Callable[..., Served], project: Config) -> Served:
    return serve(project)
