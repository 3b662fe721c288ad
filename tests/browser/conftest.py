"""Browser-test fixtures: one server on the offline fake model and one headless Chromium per module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import httpx
import pytest
from browser_helpers import make_project, start_browser

from orchestrator.fake_api.pytest_fixtures import claude_cli  # noqa: F401
from orchestrator.server import create_app
from orchestrator.server.live import ServerThread


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every browser test is slow (a real Chromium and a served app)."""
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = start_browser()
    yield driver
    driver.quit()


@dataclass
class Site:
    """A served app: its URL, an httpx client on it, and its config."""

    url: str
    api: httpx.Client
    config: Any


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The app on the fake model at `site.url`, with `site.api` (an httpx client) and `site.config`."""
    config = make_project(tmp_path_factory.mktemp("site"))
    app = create_app(config, fake=True)
    with ServerThread(app) as thread, httpx.Client(base_url=thread.url, timeout=60) as api:
        yield Site(thread.url, api, config)
        app.state.middle.runs.join(timeout=180)
