"""Layering is enforced, not hoped for: import-linter runs the contracts in pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    result = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


def test_the_contracts_can_fail(tmp_path):
    # A copy of the tickets package that imports orchestrator must break the first contract.
    pkg = tmp_path / "tickets"
    shutil.copytree(ROOT / "tickets", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "leak.py").write_text("from orchestrator.runner import Orchestrator\n")
    cfg = tmp_path / ".importlinter"
    cfg.write_text("[importlinter]\nroot_packages =\n    tickets\n    orchestrator\n\n"
                   "[importlinter:contract:1]\nname = t\ntype = forbidden\n"
                   "source_modules = tickets\nforbidden_modules = orchestrator\n")
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    env_path = f"{tmp_path}:{ROOT}"
    result = subprocess.run([exe, "--no-cache", "--config", str(cfg)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert result.returncode != 0 and "tickets.leak -> orchestrator.runner" in result.stdout, result.stdout


def test_the_plugin_api_pulls_in_no_cli_server_or_heavy_library():
    import subprocess
    import sys

    code = ("import sys, orchestrator.plugin_api; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('fastapi', 'numpy', 'faiss', 'scipy', 'langgraph', 'anthropic') "
            "or m in ('orchestrator.cli.main', 'orchestrator.cli.memory', 'orchestrator.server')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_middle_help_with_a_plugin_that_adds_a_subcommand_loads_no_config_or_memory(tmp_path):
    """The keyword plugin adds `middle memory keywords`: registering it loads the memory command
    group, which must not pull in the pydantic config, the memory facade or a backend library."""
    import subprocess
    import sys

    import pytest

    pytest.importorskip("middle_agent_keyword_memory", reason="install plugins/middle-agent-keyword-memory")
    code = ("import sys\n"
            "from orchestrator.cli.main import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('orchestrator.config.settings', 'orchestrator.memory.facade', 'numpy', 'langgraph') "
            "if m in sys.modules), 'middle_agent_keyword_memory.plugin' in sys.modules, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            env={k: v for k, v in __import__("os").environ.items() if k != "MIDDLE_LOAD_PLUGINS"})
    assert result.stderr.strip().splitlines()[-1] == "[] True", result.stderr
