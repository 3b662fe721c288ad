"""The type checker passes on the core's typed modules (the list is `[tool.mypy] files`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_finds_no_type_errors():
    if shutil.which("mypy") is None and not (Path(sys.executable).parent / "mypy").exists():
        pytest.fail("mypy is not installed: pip install -e '.[test]'")
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
