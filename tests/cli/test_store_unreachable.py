"""A store out of reach when a command starts: one `error:` line saying why, within
`[store] reconnect_s`, not the connection pool's warning for every try first."""

from __future__ import annotations

import socket
import subprocess
import sys


def _closed_port() -> int:
    with socket.socket() as s:  # a port nothing listens on any more
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_store_is_one_error_line(tmp_path):
    (tmp_path / "middle.toml").write_text(
        f'[store]\nurl = "postgresql://u@127.0.0.1:{_closed_port()}/tickets"\nreconnect_s = 1\n')
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "sync"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == 1
    assert len(lines) == 1 and lines[0].startswith("error: cannot reach the PostgreSQL store"), lines
    assert "Connection refused" in lines[0], lines  # why, from the server's side, not "the pool timed out"
