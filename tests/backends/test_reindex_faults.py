"""`middle memory reindex` under faults: another PROCESS writing all along loses nothing, and a
reindex killed with SIGKILL at any point leaves the old store or the new one, never an empty
one, and is rolled back or finished (saying so) by the next command."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from backends.retrieval.cache import CACHE_ENV
from orchestrator.memory.facade import MemoryFacade
from orchestrator.memory.rebuild import JOURNAL_NAME
from orchestrator.memory.stores import reindex
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.testing import make_repo

PROJECT = "demo"
HASHING = {"embedder": "hashing"}
OPTIONS: dict[str, dict[str, Any]] = {"bm25": {}, "dense": HASHING, "hybrid": HASHING, "hipporag": HASHING,
           "hindsight": HASHING, "sliding_window": {"background": False}}


@pytest.fixture(autouse=True)
def _private_embedding_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "embedding-cache"))


def _facade(save_dir: Path | str, backend: str) -> MemoryFacade:
    return MemoryFacade(save_dir, backend, OPTIONS[backend], PluginRegistry(load_entry_points=False))


def _writer(save_dir: str, backend: str, ready, stop, acked_count, out) -> None:
    """Another process with the store open (a running ticket, `middle serve`): index one doc
    at a time until told to stop, then report every doc whose index call returned."""
    acked: list[str] = []
    error = None
    facade = _facade(save_dir, backend)
    try:
        facade.list_docs(PROJECT)  # the store is open before the reindex starts
        ready.set()
        while not stop.is_set():
            doc = _written(len(acked))
            facade.index(PROJECT, [doc])
            acked.append(doc)
            acked_count.value = len(acked)
            time.sleep(0.005)
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        error = repr(exc)
    finally:
        facade.close()
        out.put((acked, error))


def _written(i: int) -> str:
    return f"note {i} written by the other process about the deploy checklist"


def _wait(predicate, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.01)


@pytest.mark.parametrize("backend,source", [
    ("bm25", "bm25"), ("hybrid", "hybrid"), ("dense", "dense"), ("hipporag", "hipporag"),
    ("hindsight", "hindsight"), ("sliding_window", "sliding_window"), ("hybrid", "bm25"),
])
def test_reindex_while_another_process_writes_loses_no_acknowledged_doc(tmp_path, backend, source):
    save_dir = tmp_path / "mem"
    initial = [f"ticket {i}: fixed the flaky login test by resetting cookie {i}" for i in range(12)]
    seed = _facade(save_dir, source)
    seed.index(PROJECT, initial)
    seed.close()
    ctx = multiprocessing.get_context("spawn")
    ready, stop, acked_count, out = ctx.Event(), ctx.Event(), ctx.Value("i", 0), ctx.Queue()
    writer = ctx.Process(target=_writer, args=(str(save_dir), backend, ready, stop, acked_count, out))
    writer.start()
    try:
        _wait(lambda: ready.is_set() or not writer.is_alive(), "the writer to open the store")
        assert writer.is_alive(), "the writer process failed to start"
        mem = _facade(save_dir, backend)
        for round_ in range(3):
            reindex(mem, PROJECT, source)
            seen = acked_count.value
            # the writer's next acknowledged writes come after this reindex
            _wait(lambda: acked_count.value >= seen + 2 or not writer.is_alive(), "writes")  # noqa: B023 - waited now
            acked_so_far = [_written(i) for i in range(acked_count.value)]
            listed = mem.list_docs(PROJECT)
            lost = [d for d in initial + acked_so_far if d not in listed]
            assert not lost, (f"after reindex {round_ + 1}: {len(lost)} acknowledged doc(s) "
                              f"not in the live store, e.g. {lost[0]!r}")
        mem.close()
    finally:
        stop.set()
    acked, error = out.get(timeout=120)
    writer.join(60)
    assert error is None, error
    assert len(acked) >= 6
    check = _facade(save_dir, backend)
    listed = check.list_docs(PROJECT)
    check.close()
    lost = [d for d in initial + acked if d not in listed]
    assert not lost, f"{len(lost)} acknowledged doc(s) not in the live store, e.g. {lost[0]!r}"
    assert len(listed) == len(set(listed)) == len(initial) + len(acked)


# --- kill -9 -----------------------------------------------------------------------------------

def _middle(root: Path, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY")}
    env["MIDDLE_AGENT_CACHE_DIR"] = str(root / "cache")
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli.main", "memory", *args], cwd=root,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run(root: Path, *args: str) -> tuple[int, str, str]:
    proc = _middle(root, *args)
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    return proc.returncode, out, err


def _backups(store: Path) -> set[str]:
    return {p.name for p in store.glob(".reindex-*") if p.is_dir()} if store.is_dir() else set()


def _reindex_and_kill(root: Path, store: Path, backend: str, delay: float | None) -> float:
    """Start `middle memory reindex --from BACKEND`; once it has begun (its backup folder
    appeared) wait `delay` seconds and SIGKILL it. With delay None let it finish and return
    how long it ran after the folder appeared (the span to spread kills over)."""
    before = _backups(store)
    proc = _middle(root, "reindex", "--from", backend)
    while proc.poll() is None and not (_backups(store) - before):
        time.sleep(0.001)
    began = time.monotonic()
    if delay is None:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        return time.monotonic() - began
    time.sleep(delay)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    return 0.0


def _project(root: Path, backend: str, count: int) -> tuple[list[str], Path]:
    """A project with `count` docs in `backend`'s store: (the docs, the store directory)."""
    make_repo(root / "repo")
    options = '[memory.options]\nembedder = "hashing"\n' if OPTIONS[backend] else ""
    (root / "middle.toml").write_text(
        f'[project]\nid = "{PROJECT}"\npath = "repo"\n[memory]\nsave_dir = "mem"\n'
        f'backend = "{backend}"\n{options}')
    docs = [f"doc {i}: the export job {i % 7} timed out on table {i % 13}" for i in range(count)]
    seed = _facade(root / "mem", backend)
    seed.index(PROJECT, docs)
    seed.close()
    return docs, root / "mem" / PROJECT


@pytest.mark.parametrize("backend", ["hybrid", "bm25"])
def test_kill_9_at_seeded_points_of_a_reindex_loses_nothing_and_is_recovered(
        tmp_path, backend, caplog):
    root = tmp_path
    docs, store = _project(root, backend, 300)
    span = _reindex_and_kill(root, store, backend, None)  # how long the rebuild itself takes
    rng = random.Random(21)
    delays = [0.0] + sorted(rng.uniform(0, span) for _ in range(3))
    interrupted = 0
    for n, delay in enumerate(delays):
        _reindex_and_kill(root, store, backend, delay)
        left_journal = (store / JOURNAL_NAME).exists()
        if n == 0:  # as the user meets it: the next command
            code, out, err = _run(root, "list")
            assert code == 0, err
            listed = [line.split("  ", 1)[1] for line in out.splitlines()]
        else:  # the next process to open the project, in-process to keep the test quick
            caplog.clear()
            with caplog.at_level("WARNING", logger="middle.memory"):
                check = _facade(root / "mem", backend)
                listed = check.list_docs(PROJECT)
                check.close()
            err = caplog.text
        assert sorted(listed) == sorted(docs), (
            f"killed {delay:.3f}s into the reindex: the live store lists {len(listed)} of "
            f"{len(docs)} docs; stderr: {err}")
        if left_journal:
            interrupted += 1
            assert "an interrupted `middle memory reindex`" in err, err
            assert ("was rolled back" in err) or ("was finished" in err), err
        assert not (store / JOURNAL_NAME).exists()
        assert not list(store.glob(".reindex-*/new")), "a half-built store was left behind"
    assert interrupted >= 1, "no kill landed inside a reindex: the store is too small to test"
    _reindex_and_kill(root, store, backend, None)  # and a reindex after all that works
    code, out, _ = _run(root, "list")
    assert code == 0 and len(out.splitlines()) == len(docs)


def test_kill_9_during_reindexes_while_another_process_writes_loses_no_acknowledged_doc(tmp_path):
    """The writer, blocked on the lock while a reindex runs, is the next to open the project
    after each kill: it recovers the store and goes on writing into the live one."""
    root, backend = tmp_path, "hybrid"
    docs, store = _project(root, backend, 200)
    ctx = multiprocessing.get_context("spawn")
    ready, stop, acked_count, out = ctx.Event(), ctx.Event(), ctx.Value("i", 0), ctx.Queue()
    writer = ctx.Process(target=_writer, args=(str(root / "mem"), backend, ready, stop,
                                               acked_count, out))
    writer.start()
    try:
        _wait(lambda: ready.is_set() or not writer.is_alive(), "the writer to open the store")
        span = _reindex_and_kill(root, store, backend, None)
        rng = random.Random(2121)
        for delay in [0.0] + sorted(rng.uniform(0, span) for _ in range(2)):
            _reindex_and_kill(root, store, backend, delay)
            seen = acked_count.value
            _wait(lambda: acked_count.value >= seen + 2 or not writer.is_alive(), "writes")  # noqa: B023 - waited now
        _reindex_and_kill(root, store, backend, None)
    finally:
        stop.set()
    acked, error = out.get(timeout=120)
    writer.join(60)
    assert error is None, error
    check = _facade(root / "mem", backend)
    listed = check.list_docs(PROJECT)
    check.close()
    lost = [d for d in docs + acked if d not in listed]
    assert not lost, f"{len(lost)} acknowledged doc(s) not in the live store, e.g. {lost[0]!r}"
    assert len(listed) == len(set(listed)) == len(docs) + len(acked)
    assert not (store / JOURNAL_NAME).exists()
