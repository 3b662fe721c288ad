"""Fixtures for graph tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from graph_helpers import RecordedBackend

from orchestrator.testing import InMemoryBackend, make_repo


@pytest.fixture(autouse=True)
def _reset_recorded():
    RecordedBackend.instances.clear()
    RecordedBackend.fail_on = set()
    InMemoryBackend.reset()
    yield
    InMemoryBackend.reset()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"README.md": "sample\n"})


@pytest.fixture
def team(tmp_path: Path, pg_url: str) -> Path:
    """The team's shared repository ([project] repo_url): a bare clone of a one-commit project."""
    from orchestrator.workspace.git import git

    seed = make_repo(tmp_path / "seed", {"README.md": "calc\n"})
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(remote))
    return remote
