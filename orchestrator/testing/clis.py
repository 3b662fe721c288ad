"""require_cli: a coding agent's CLI for a test, skipped without it (failed under CI, which installs it)."""

from __future__ import annotations

import os
import shutil

import pytest

__all__ = ["require_cli"]


def require_cli(name: str, install: str) -> str:
    """The path of the `name` executable on PATH (a coding agent's CLI: codex, gemini, opencode,
    aider); else skip the test with the install command, or fail it under CI, whose .ci/run installs
    every built-in coding agent's CLI before the tests."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but `{name}` is not on PATH; .ci/run installs it ({install})")
        pytest.skip(f"`{name}` is not installed ({install})")
    return path
