"""`middle bench import`: the time of `middle memory import git` on a built N-commit repository."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from orchestrator.config.paths import CACHE_VARIABLE
from orchestrator.memory.facade import MemoryFacade
from orchestrator.memory.importers import git as git_import

from .git_history import build_repo
from .runner import Bench, Progress, no_progress
from .ticket_data import load_ticket_file

PROJECT = "bench"


@contextmanager
def _cache_in(folder: Path) -> Iterator[None]:
    """The embedding cache in `folder` for the run: every commit is embedded, none read from
    an earlier run's cache (the cache itself is still written, as a real import does)."""
    before = os.environ.get(CACHE_VARIABLE)
    os.environ[CACHE_VARIABLE] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CACHE_VARIABLE, None)
        else:
            os.environ[CACHE_VARIABLE] = before


def run_import(dataset: Path, backends: Sequence[str], commits: int, *,
               work_dir: Path | None = None, progress: Progress = no_progress) -> dict[str, Any]:
    """Per backend, a fresh store and cache: import a `commits`-commit repository whose
    messages and paths are the dataset's tickets, then import again (nothing new)."""
    history = load_ticket_file(dataset)
    bench = Bench(backends, work_dir, progress)
    results = []
    with bench.scratch() as tmp:
        repo = build_repo(tmp / "repo", history.tickets, commits)
        for n, spec in enumerate(bench.specs):
            run_dir = tmp / f"run{n}"
            with _cache_in(run_dir / "cache"):
                facade = MemoryFacade(run_dir / "memory", spec.name, spec.options, bench.registry)
                try:
                    label = f"{spec.label}: import"
                    wall, cpu = time.perf_counter(), time.process_time()
                    report, total = git_import.import_history(
                        facade, PROJECT, repo, run_dir, None, lambda _d, t: progress(label, t))  # noqa: B023 - called now
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    again = time.perf_counter()
                    second, _ = git_import.import_history(facade, PROJECT, repo, run_dir, None,
                                                          lambda _d, _t: no_progress("", 0))
                    again = time.perf_counter() - again
                finally:
                    facade.close()
            results.append({"backend": spec.label, "commits": total, "added": report.added,
                            "wall_s": wall, "cpu_s": cpu, "commits_per_s": total / wall,
                            "rerun_s": again, "rerun_added": second.added})
    return {"kind": "import", "dataset": f"{commits:,} commits from {dataset}",
            "results": results}
