"""Fixtures of the CLI tests: a small project folder to run `middle` commands in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.fake_api.pytest_fixtures import claude_cli  # noqa: F401  (a fixture)
from orchestrator.testing import make_repo


@pytest.fixture
def project_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder: a git repository `repo/`, an empty `tickets/` folder and a middle.toml
    naming them (no [project] id, memory off); no API key or config override from the environment."""
    monkeypatch.chdir(tmp_path)
    for var in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    make_repo(tmp_path / "repo")
    (tmp_path / "tickets").mkdir()
    (tmp_path / "middle.toml").write_text('[project]\npath = "repo"\n')
    return tmp_path


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The tickets each `middle run` starts (the batch itself is not run: its ids are recorded)."""
    from orchestrator.running import batch

    seen: list[list[str]] = []
    def run_batch(orch: Any, ids: list[str], **kw: Any) -> Any:
        seen.append(list(ids))
        return batch.BatchResult()

    monkeypatch.setattr(batch, "run_batch", run_batch)
    return seen
