"""Real processes sharing one store, as two `middle` runs on one project do.

`run_processes` spawns processes that each open the backend through a factory importable by
dotted path, then index and delete disjoint docs from several threads, every call under one
`filelock.FileLock` (and a thread lock), like the memory facade; `lock_factory` names another
cross-process lock (e.g. a database's advisory lock: then the processes stand for machines).
Afterwards it opens the store once more and reports docs that were lost, stored twice, and
deleted docs that came back. No pytest needed::

    from orchestrator.testing import run_processes

    report = run_processes("my_plugin.backend:MyBackend", tmp_path / "store")
    assert report.ok, report.summary()

The factory is called as `factory(store_dir)`; a backend class whose options all have defaults
is a factory already.
"""

from __future__ import annotations

import importlib
import multiprocessing
import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from orchestrator.plugins.memory_backend import MemoryBackend
from orchestrator.testing.samples import sample_doc

DROP_EVERY = 4  # every 4th step also indexes a doc that the thread's next step deletes


def load_factory(path: str) -> Callable[[Path], MemoryBackend]:
    """Import `package.module:callable` (or `package.module.callable`)."""
    module, sep, attr = path.partition(":")
    if not sep:
        module, _, attr = path.rpartition(".")
    if not module or not attr:
        raise ValueError(f"factory {path!r} is not a dotted path: write 'package.module:callable'")
    target = importlib.import_module(module)
    for part in attr.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"factory {path!r} is not callable")
    return target


def planned_docs(proc: int, thread: int, docs: int) -> tuple[list[str], list[str]]:
    """The docs one thread keeps, and the docs it indexes and deletes again."""
    keep = [sample_doc(j, tag=f"p{proc}t{thread}k") for j in range(docs)]
    drop = [sample_doc(j, tag=f"p{proc}t{thread}d") for j in range(0, docs, DROP_EVERY)]
    return keep, drop


@dataclass
class ProcessRunReport:
    """What a run found: every list empty means nothing was lost, resurrected or broken."""

    kept: int
    deleted: int
    lost: list[str] = field(default_factory=list)
    resurrected: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.resurrected or self.failures or self.duplicated)

    def summary(self) -> str:
        text = (f"lost {len(self.lost)} of {self.kept} docs, resurrected {len(self.resurrected)}"
                f" of {self.deleted} deleted docs, {len(self.duplicated)} stored twice, "
                f"{len(self.failures)} process failure(s)")
        if self.lost:
            text += f"; first lost: {self.lost[0]!r}"
        if self.resurrected:
            text += f"; first resurrected: {self.resurrected[0]!r}"
        for failure in self.failures:
            text += "\n" + failure
        return text


def run_processes(
    factory: str,
    store_dir: str | Path,
    *,
    processes: int = 2,
    threads: int = 4,
    docs_per_thread: int = 12,
    lock_path: str | Path | None = None,
    lock_factory: str | None = None,
    timeout_s: float = 120.0,
) -> ProcessRunReport:
    """Run the scenario (see the module docstring) and check the store afterwards.
    `lock_factory`: "package.module:callable" giving, as `callable(store_dir)`, a reusable
    context manager that every call of every process holds (default: a FileLock)."""
    load_factory(factory)  # a bad path fails here, with its own error, not in every child
    if lock_factory is not None:
        load_factory(lock_factory)
    store_dir = Path(store_dir)
    lock = Path(lock_path) if lock_path else store_dir.with_name(store_dir.name + ".lock")
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter, as a second `middle` is
    ready = ctx.Barrier(processes)
    errors = ctx.Queue()
    children = [
        ctx.Process(target=_process_main, name=f"store-writer-{p}",
                    args=(factory, str(store_dir), str(lock), lock_factory, p, threads,
                          docs_per_thread, ready, errors))
        for p in range(processes)
    ]
    for child in children:
        child.start()
    failures: list[str] = []
    deadline = time.monotonic() + timeout_s
    while any(c.is_alive() for c in children) and time.monotonic() < deadline:
        _drain(errors, failures, wait=0.1)  # read while they run: a full pipe blocks an exit
    for child in children:
        if child.is_alive():
            child.terminate()
            failures.append(f"{child.name} still running after {timeout_s:.0f}s; terminated")
        child.join(10)
    _drain(errors, failures, wait=0)
    failures += [f"{c.name} exited with code {c.exitcode}" for c in children if c.exitcode]

    plans = [planned_docs(p, t, docs_per_thread) for p in range(processes) for t in range(threads)]
    keep = [d for kept, _ in plans for d in kept]
    drop = [d for _, dropped in plans for d in dropped]
    with _cross_process_lock(lock_factory, store_dir, lock):
        present = _present(load_factory(factory)(store_dir), keep + drop)
    return ProcessRunReport(
        kept=len(keep), deleted=len(drop),
        lost=[d for d in keep if d not in present],
        resurrected=[d for d in drop if d in present],
        failures=failures,
        duplicated=sorted({d for d in present if present.count(d) > 1}),
    )


def _cross_process_lock(lock_factory: str | None, store_dir: Path, lock_path: Path) -> Any:
    if lock_factory is not None:
        return load_factory(lock_factory)(store_dir)
    return FileLock(str(lock_path), timeout=60)


def _present(backend: MemoryBackend, docs: list[str]) -> list[str]:
    """Which of docs the store holds (each as often as it is stored): list_docs, else each doc
    as its own query."""
    try:
        try:
            return backend.list_docs()
        except NotImplementedError:
            found = []
            for d in docs:
                found += [r for r in backend.retrieve([d], 5)[0]["docs"] if r == d]
            return found
    finally:
        backend.close()


def _drain(errors, failures: list[str], wait: float) -> None:
    try:
        failures.append(errors.get(timeout=wait) if wait else errors.get_nowait())
        while True:
            failures.append(errors.get_nowait())
    except queue.Empty:
        pass


def _process_main(factory: str, store_dir: str, lock_path: str, lock_factory: str | None,
                  proc: int, threads: int, docs: int, ready, errors) -> None:
    """One process: open the backend under the lock, then its threads write concurrently."""
    try:
        thread_lock = threading.Lock()  # the facade's per-project thread lock
        file_lock = _cross_process_lock(lock_factory, Path(store_dir), Path(lock_path))
        with file_lock:  # the facade opens a backend under the project's lock too
            backend = load_factory(factory)(Path(store_dir))
        ready.wait(60)
        failed: list[str] = []

        def call(method: str, docs_arg: list[str]) -> None:
            with thread_lock, file_lock:
                getattr(backend, method)(docs_arg)

        def work(t: int) -> None:
            keep, drop = planned_docs(proc, t, docs)
            pending: str | None = None
            try:
                for j, doc in enumerate(keep):
                    call("index", [doc])
                    if pending is not None:
                        call("delete", [pending])
                        pending = None
                    if j % DROP_EVERY == 0:
                        pending = drop[j // DROP_EVERY]
                        call("index", [pending])
                if pending is not None:
                    call("delete", [pending])
            except Exception:  # noqa: BLE001 - reported to the parent
                failed.append(f"process {proc} thread {t}:\n{traceback.format_exc()}")

        pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        with thread_lock, file_lock:
            backend.close()
        for failure in failed:
            errors.put(failure)
    except Exception:  # noqa: BLE001 - reported to the parent
        ready.abort()  # the other processes must not wait for this one at the barrier
        errors.put(f"process {proc}:\n{traceback.format_exc()}")
