"""Keep the README honest: its two set-up commands come first, and the demo runs offline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    found = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert found, "the README has no bash block"
    first_block = found.group(1)
    return [line for line in first_block.splitlines() if line and not line.startswith("#")]


def test_readme_starts_with_demo_and_test_commands():
    demo, tests = readme_commands()
    assert demo.startswith("pip install -e ") and demo.endswith("middle demo")
    assert "pip install" in tests and tests.endswith("pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    # Everything installs with pip: the `claude` extra brings the CLI.
    assert '".[claude,embeddings]"' in demo and '".[test,claude]"' in tests
    # CI installs the project only through the README's command (its last line, see the test
    # below); the built-in coding agents' CLIs come from npm, each pinned to one version.
    npm = [line for line in ci.splitlines() if "npm install" in line]
    assert all(re.match(r"npm install -g (@[\w.-]+/)?[\w.-]+@\d+\.\d+\.\d+ ", line) for line in npm), npm
    # (aider, a coding agent's CLI, and hatch, a runner the gate's tests run, each go into a venv of
    # their own under /opt/middle-*, by that venv's pip: not the project's)
    own = [line for line in ci.splitlines() if "pip install" in line
           and not re.search(r"/opt/middle-[\w-]+/bin/pip install", line)]
    assert sum(line.count("pip install") for line in own) == tests.count("pip install")
    # Each `pip install` stands alone: a fresh venv's pip (23.2 with Python 3.11) cannot resolve
    # the example plugin's `middle-agent` requirement from an `-e .` in the same command.
    for command in (demo, tests):
        for part in command.split("&&"):
            assert part.count("pip install") <= 1 and not ("-e ." in part and "./plugins" in part), part


def test_ci_runs_the_readmes_test_command_exactly():
    """.ci/run's last line is the README's test command, word for word, run with the pip a new
    venv has (not upgraded, as a user's)."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "--upgrade pip" not in ci
    assert ci.rstrip().splitlines()[-1] == readme_commands()[1]


def test_the_claude_extra_bundles_the_cli_version_the_readme_names():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'claude = \["claude-agent-sdk==[\d.]+"\]', pyproject)
    version = re.search(r"claude-code@([\d.]+)", (ROOT / "README.md").read_text()).group(1)
    from orchestrator.claude_cli import bundled_cli

    cli = bundled_cli()
    if cli is None and os.environ.get("CI"):
        pytest.fail("the claude extra is not installed: pip install -e '.[claude]'")
    if cli is None:
        pytest.skip("the claude extra is not installed")
    bundled = (Path(cli).parent / "claude.version").read_text().split()[0]
    assert bundled == version


@pytest.mark.cli
@pytest.mark.slow
def test_middle_demo_runs_offline_without_an_api_key(tmp_path, claude_cli):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    env.pop("MEMORY_SAVE_DIR", None)
    middle = Path(sys.executable).with_name("middle")
    cmd = [str(middle)] if middle.exists() else [sys.executable, "-m", "orchestrator.cli.main"]
    proc = subprocess.run(cmd + ["demo", "--dir", str(tmp_path / "demo")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for tid in ("001-greeting", "002-farewell", "003-multiply"):
        assert f"complete ticket {tid}" in out
    assert "Memories invoked:" in out  # the second ticket's log shows recall of the first
    assert (tmp_path / "demo" / "repo" / "calc" / "farewell.py").read_text().count("Goodbye") == 1
    assert "3 doc(s)" in out


@pytest.mark.parametrize("path", sorted((ROOT / "examples" / "configs").glob("*.toml")), ids=lambda p: p.stem)
def test_example_configs_load_and_name_a_registered_backend(path):
    from orchestrator.config.settings import load_config
    from orchestrator.plugins.manager import PluginRegistry

    cfg = load_config(path, environ={})
    assert cfg.memory.backend == path.stem  # one config per backend, named after it
    if cfg.memory.backend != "none":
        PluginRegistry(load_entry_points=False).backend_options(cfg.memory.backend, cfg.memory.options)


@pytest.mark.cli
@pytest.mark.slow
def test_python_api_example_runs_offline(tmp_path, claude_cli):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "api_example.py"), str(tmp_path / "w")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(": complete after 1 turn(s)") == 3
    assert "Ticket: Add a greeting module." in proc.stdout
