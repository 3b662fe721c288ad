"""Tests load no pip-installed plugin unless they ask (as datasette's tests do)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestrator.plugins.manager import registry

pytest.importorskip("middle_agent_keyword_memory", reason="install plugins/middle-agent-keyword-memory")


def test_a_test_loads_only_the_built_in_plugins():
    assert os.environ["MIDDLE_LOAD_PLUGINS"] == ""
    assert "keyword" not in registry().backends and "bm25" in registry().backends
    assert not registry().entry_points


def test_a_process_a_test_starts_loads_none_either(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "backends"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "│ bm25 " in proc.stdout and "│ keyword " not in proc.stdout


@pytest.mark.installed_plugins
def test_the_marker_loads_the_installed_plugins():
    assert "keyword" in registry().backends


def test_the_fixture_loads_them_and_adds_their_commands(installed_plugins):
    from click.testing import CliRunner

    from orchestrator.cli.main import main

    assert "keyword" in registry().backends
    assert "keywords" in CliRunner().invoke(main, ["memory", "--help"]).output


def test_after_those_tests_the_registry_and_commands_are_the_built_in_ones_again():
    from click.testing import CliRunner

    from orchestrator.cli.main import main

    assert "keyword" not in registry().backends
    assert "keywords" not in CliRunner().invoke(main, ["memory", "--help"]).output
