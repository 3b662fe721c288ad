"""A `[store] url` naming a database the server does not have once waited 60 s whatever
`reconnect_s`, then blamed the server: it is said at once, and reconnect_s holds for every
command, the read-only ones too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.postgres


def _middle(root: Path, *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", *args], cwd=root,
                         capture_output=True, text=True, timeout=300)
    assert "Traceback" not in out.stderr and out.returncode != 0, out.stderr
    return out


def _project(root: Path, url: str, reconnect_s: float) -> Path:
    (root / "tickets").mkdir()
    subprocess.run(["git", "init", "-q", str(root / "repo")], check=True)
    (root / "middle.toml").write_text(f'[project]\nid = "p"\npath = "repo"\n[store]\nurl = "{url}"\n'
                                      f"reconnect_s = {reconnect_s}\n")
    return root


@pytest.mark.parametrize("command", [["tickets"], ["sync"], ["log", "t1"]])
def test_a_missing_database_is_one_error_line_saying_so(pg_server, tmp_path, command):
    url = pg_server.url("middle_no_such_database")
    out = _middle(_project(tmp_path, url, 300), *command)
    assert out.stderr.strip().splitlines() == [
        f"error: the PostgreSQL server at {url.replace('postgres:@', 'postgres:***@')} has no database "
        "'middle_no_such_database': create it (e.g. `createdb middle_no_such_database`) or fix "
        "[store] url (or MIDDLE_STORE_URL)"], out.stderr


def test_reconnect_s_holds_for_the_read_only_commands(tmp_path):
    """No server at all: `middle tickets` gives up after [store] reconnect_s (the pool says so)."""
    url = f"postgresql://nobody@/middle?host={tmp_path / 'no-server-here'}"
    out = _middle(_project(tmp_path, url, 1.5), "tickets")
    assert "cannot reach the PostgreSQL store" in out.stderr and "after 1.5 sec" in out.stderr, out.stderr
