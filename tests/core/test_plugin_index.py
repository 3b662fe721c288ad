"""The remembered plugin index: a package installed or removed is seen by the next command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from orchestrator.plugins.index import PluginEntry

REPO = Path(__file__).resolve().parents[2]

PLUGIN = '''
import click
from orchestrator.plugin_api import hookimpl

@click.command(name="hello-fake")
def hello():
    """Say hello from an installed plugin."""
    click.echo("hello from fakeplug")

@hookimpl
def register_commands(cli):
    cli.add_command(hello)
'''


def _install(site: Path) -> Path:
    """A distribution as pip leaves it: a module plus its dist-info with a middle_agent entry point."""
    site.mkdir(exist_ok=True)
    (site / "fakeplug_mod.py").write_text(PLUGIN)
    info = site / "fakeplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[middle_agent]\nfake = fakeplug_mod\n")
    return info


def _help(tmp_path: Path, site: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIDDLE_")}
    # This checkout's middle-agent (not whichever is pip-installed), and the fake site's packages.
    env.update(MIDDLE_AGENT_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(REPO), str(site)]))
    code = "import sys\nfrom orchestrator.cli.main import main\nmain(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, "--help"], cwd=tmp_path, capture_output=True,
                          text=True, env=env, timeout=120)


def test_installing_and_removing_a_plugin_is_seen_by_the_next_command(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    assert "hello-fake" not in _help(tmp_path, site).stdout  # remembered without the plugin
    info = _install(site)
    shown = _help(tmp_path, site)
    assert "hello-fake" in shown.stdout and "Say hello from an installed plugin" in shown.stdout, shown.stderr
    memo = next((tmp_path / "cache" / "plugins").glob("*.json"))
    remembered = {p["name"]: p for p in json.loads(memo.read_text())["plugins"]}
    assert {k: remembered["fake"][k] for k in ("name", "value", "dist", "version")} == \
        {"name": "fake", "value": "fakeplug_mod", "dist": "fakeplug", "version": "0.1"}
    assert remembered["fake"]["source"] == str(info)  # where its entry point is declared
    for child in info.iterdir():
        child.unlink()
    info.rmdir()  # `pip uninstall`
    assert "hello-fake" not in _help(tmp_path, site).stdout


def test_a_corrupt_index_is_scanned_again(tmp_path):
    site = tmp_path / "site"
    _install(site)
    assert "hello-fake" in _help(tmp_path, site).stdout
    memo = next((tmp_path / "cache" / "plugins").glob("*.json"))
    for bad in ("{oops", '{"key": 1}', json.dumps({"key": json.loads(memo.read_text())["key"],
                                                    "plugins": [{"name": 1}]})):
        memo.write_text(bad)
        assert "hello-fake" in _help(tmp_path, site).stdout


def test_an_entry_point_loads_a_module_or_an_attribute_of_it():
    assert PluginEntry("x", "orchestrator.names", "d", "1").load().CONFIG_FILE == "middle.toml"
    assert PluginEntry("x", "orchestrator.names:CONFIG_FILE", "d", "1").load() == "middle.toml"
    assert PluginEntry("x", "orchestrator.plugins.index:PluginEntry.load", "d", "1").load() is PluginEntry.load


def test_a_tampered_index_imports_nothing_that_no_installed_distribution_declares(tmp_path):
    """The index is a file in the user's cache: one that names another module (or a plugin no
    distribution declares) must not make `middle` import it."""
    site = tmp_path / "site"
    _install(site)
    (site / "planted_mod.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('PLANTED-RAN').write_text('x')\n")
    assert "hello-fake" in _help(tmp_path, site).stdout  # writes site/__pycache__: the folder's time
    assert "hello-fake" in _help(tmp_path, site).stdout  # moved, so this run remembers the index
    memo = next((tmp_path / "cache" / "plugins").glob("*.json"))
    remembered = json.loads(memo.read_text())
    for planted in ({"name": "fake", "value": "planted_mod", "dist": "fakeplug", "version": "0.1"},
                    {"name": "other", "value": "planted_mod", "dist": "fakeplug", "version": "0.1"},
                    {"name": "other", "value": "planted_mod", "dist": "nosuchdist", "version": "1"}):
        memo.write_text(json.dumps({**remembered, "plugins": [planted]}))
        shown = _help(tmp_path, site)
        assert not (site / "PLANTED-RAN").exists(), planted
        assert "hello-fake" in shown.stdout, shown.stderr  # the real plugin, from a fresh scan
        assert "no installed distribution declares" in shown.stderr
        assert "planted_mod" not in {p["value"] for p in json.loads(memo.read_text())["plugins"]}
