"""Browser-test fixtures: one server on the offline fake model and one headless Chromium per module."""

from __future__ import annotations

from typing import Any, Iterator

import httpx
import pytest

from orchestrator.fake_api.pytest_fixtures import claude_cli  # noqa: F401
from orchestrator.server import create_app
from orchestrator.server.live import ServerThread

from browser_helpers import make_project, start_browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = start_browser()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The app on the fake model at `site.url`, with `site.api` (an httpx client) and `site.config`."""
    config = make_project(tmp_path_factory.mktemp("site"))
    app = create_app(config, fake=True)
    with ServerThread(app) as thread:
        thread.api = httpx.Client(base_url=thread.url, timeout=60)
        thread.config = config
        yield thread
        app.state.middle.runs.join(timeout=180)
        thread.api.close()
