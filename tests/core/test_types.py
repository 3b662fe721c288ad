"""The type checker passes on the whole tree (the list is `[tool.mypy] files`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What must be type-checked: the installed packages, the example plugin, the Python API example.
PLUGIN = "plugins/middle-agent-keyword-memory/middle_agent_keyword_memory"


def test_mypy_checks_every_module_of_the_tree():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = [ROOT / f for f in pyproject["tool"]["mypy"]["files"]]
    packages = [p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]]
    modules = [m for top in (*packages, PLUGIN) for m in (ROOT / top).rglob("*.py")]
    modules.append(ROOT / "examples" / "api_example.py")
    unchecked = [str(m.relative_to(ROOT)) for m in modules
                 if not any(m == f or f in m.parents for f in listed)]
    assert not unchecked, f"{len(unchecked)} modules mypy does not check, e.g. {unchecked[:5]}"


def test_mypy_finds_no_type_errors():
    if shutil.which("mypy") is None and not (Path(sys.executable).parent / "mypy").exists():
        pytest.fail("mypy is not installed: pip install -e '.[test]'")
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_finds_no_type_errors_in_the_tests():
    """The tests type-check too (each test folder's helpers are modules of their own, so the
    folders are the package bases)."""
    proc = subprocess.run([sys.executable, "-m", "mypy", "--explicit-package-bases", "tests"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
