"""A process killed (kill -9) while it built a new store file once left its half-built
`.<store>.<pid>-<hex>.new` files for good: the next open of the store removes those of dead pids."""

from __future__ import annotations

import subprocess
import sys

from backends.retrieval.store import RetrievalStore

# Builds the store file, then kills itself with SIGKILL just before it would link it into place.
KILLED_CREATOR = """
import os, signal, sys
from pathlib import Path
from backends.retrieval.store import RetrievalStore
os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
RetrievalStore(Path(sys.argv[1]), use_vectors=True)
"""


def test_the_leftovers_of_a_creator_killed_mid_build_go_at_the_next_open(tmp_path):
    path = tmp_path / "hybrid.sqlite3"
    killed = subprocess.run([sys.executable, "-c", KILLED_CREATOR, str(path)], capture_output=True)
    assert killed.returncode == -9, killed.stderr
    assert list(tmp_path.glob(".hybrid.sqlite3.*.new")) and not path.exists()  # what kill -9 left
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        building = tmp_path / f".hybrid.sqlite3.{alive.pid}-0badc0de.new"  # a live creator's
        building.write_bytes(b"")
        RetrievalStore(path, use_vectors=True).close()
        assert sorted(p.name for p in tmp_path.glob(".hybrid.sqlite3.*.new*")) == [building.name]
        RetrievalStore(path, use_vectors=True).close()  # an existing store's open cleans up too
        assert building.exists()
    finally:
        alive.kill()
        alive.wait()
    RetrievalStore(path, use_vectors=True).close()
    assert list(tmp_path.glob(".hybrid.sqlite3.*.new*")) == []
