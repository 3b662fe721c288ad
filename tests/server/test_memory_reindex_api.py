"""`middle memory reindex` while `middle serve` has the project's store open: the server's later
writes land in the rebuilt store, and the CLI and the API list the same docs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def middle(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY")}
    env["MIDDLE_AGENT_CACHE_DIR"] = str(root / "cache")
    out = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "memory", *args], cwd=root,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, (out.stdout, out.stderr)
    return out


def test_docs_indexed_through_the_api_after_a_reindex_are_in_the_live_store(server, tmp_path):
    base = "/api/projects/calc/memory"
    a, b, c, d = (f"Ticket: {name}. Done." for name in ("Fix login", "Speed up export",
                                                          "Add dark mode", "Round totals"))
    assert server.client.post(f"{base}/index", json={"docs": [a, b]}).status_code == 200
    done = middle(tmp_path, "reindex", "--from", "bm25")
    assert "rebuilt the bm25 store: 2 doc(s) indexed afresh" in done.stdout
    assert server.client.post(f"{base}/index", json={"docs": [c, d]}).status_code == 200

    listed = middle(tmp_path, "list")
    assert [line.split("  ", 1)[1] for line in listed.stdout.splitlines()] == [a, b, c, d]
    assert "(4 doc(s) in " in listed.stderr
    api = server.client.get(f"{base}/docs").json()
    assert [doc["text"] for doc in api["docs"]] == [a, b, c, d]
    export = middle(tmp_path, "export").stdout
    assert all(doc in export for doc in (a, b, c, d))
