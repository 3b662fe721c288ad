"""Real processes: kill -9 in the middle of a retain, and two processes retaining at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from backends.hindsight import HindsightBackend

REPO = Path(__file__).resolve().parents[2]
OPTIONS = {"embedder": "hashing", "mental_models": {}}

KILLED_CHILD = """
import sys, time
from pathlib import Path
import backends.hindsight.retain as retain
from backends.hindsight import HindsightBackend
store, marker = Path(sys.argv[1]), Path(sys.argv[2])
hb = HindsightBackend(store, {"embedder": "hashing", "mental_models": {}})
hb.index(["First complete doc: the alpha service owns billing."])
def stuck(*args, **kwargs):  # runs inside the write transaction, after the facts are inserted
    marker.write_text("inside")
    time.sleep(120)
retain.consolidate_fact = stuck
hb.index(["Second doc: the beta service owns search, never committed."])
"""

WRITER_CHILD = """
import sys, time
from pathlib import Path
from backends.hindsight import HindsightBackend
store, name, flags = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
hb = HindsightBackend(store, {"embedder": "hashing", "mental_models": {}})
def wait_for(step):  # until every writer has reached `step`, however late it started
    (flags / f"{name}.{step}").touch()
    deadline = time.monotonic() + 90
    while len(list(flags.glob(f"*.{step}"))) < 2:
        if time.monotonic() > deadline:
            sys.exit(f"writer {name}: the other writer never reached {step}")
        time.sleep(0.01)
wait_for("ready")
for i in range(15):
    hb.retain(f"Writer {name} note {i}: the SharedService cache for item{name}{i} was fixed.")
    if i == 0:
        wait_for("first")  # each has written before either goes on: the writes overlap
hb.close()
"""


def _spawn(script: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_kill_9_mid_retain_leaves_the_last_complete_state(tmp_path):
    store, marker = tmp_path / "bank", tmp_path / "marker"
    child = _spawn(KILLED_CHILD, str(store), str(marker))
    deadline = time.monotonic() + 60
    while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), child.communicate()[1]
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    hb = HindsightBackend(store, OPTIONS)
    try:
        assert hb.list_docs() == ["First complete doc: the alpha service owns billing."]
        assert all("beta" not in h.text for h in hb.recall_query("beta service search", 10).hits)
        with hb.bank.read() as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert conn.execute("SELECT COUNT(*) FROM vectors").fetchone() == \
                conn.execute("SELECT COUNT(*) FROM facts").fetchone()
        hb.index(["Third doc: the gamma service owns email."])
        assert len(hb.list_docs()) == 2
    finally:
        hb.close()


def test_two_processes_retaining_at_once_lose_nothing(tmp_path):
    store = tmp_path / "bank"
    HindsightBackend(store, OPTIONS).close()
    flags = tmp_path / "flags"
    flags.mkdir()
    children = [_spawn(WRITER_CHILD, str(store), name, str(flags)) for name in ("a", "b")]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    # Both wrote their first doc before either wrote its second: the two writers overlapped.
    assert sorted(p.name for p in flags.iterdir()) == ["a.first", "a.ready", "b.first", "b.ready"]
    hb = HindsightBackend(store, OPTIONS)
    try:
        docs = hb.list_docs()
        assert sorted(docs) == sorted(f"Writer {n} note {i}: the SharedService cache for item{n}{i} "
                                      "was fixed." for n in "ab" for i in range(15))
        with hb.bank.read() as conn:  # one entity, not one per process
            assert conn.execute("SELECT COUNT(*) FROM entities WHERE key = 'sharedservice'").fetchone() == (1,)
        assert hb.recall_query("itemb14", 1).hits[0].text.startswith("Writer b note 14")
    finally:
        hb.close()
