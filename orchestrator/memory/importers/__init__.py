"""`middle memory import`: a project's existing history (git log, notes, Claude Code sessions) into memory."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from filelock import FileLock, Timeout

from orchestrator.errors import MemoryStoreError, MiddleError
from orchestrator.killpoints import point

BATCH = 256  # records per index call: one lock hold and one embedding batch each

Record = tuple[str, float | None]  # (text, unix time when it happened)
Advance = Callable[[int], None]
Note = Callable[[dict[str, dict[str, Any]]], None]  # records the origins of docs just indexed (text -> origin)


@dataclass
class ImportReport:
    """What an import did: docs read, newly indexed, and already in memory."""

    read: int = 0
    added: int = 0
    already: int = 0


def lock_file(state_dir: Path, project_id: str) -> Path:
    """`<state_dir>/imports/<project>.lock`: held for a whole import of the project."""
    return state_dir / "imports" / f"{project_id}.lock"


@contextmanager
def import_lock(state_dir: Path, project_id: str) -> Iterator[None]:
    """One import of a project at a time on this machine: a second one fails at once instead
    of indexing the same commits beside the first (the OS drops the lock of a killed import)."""
    path = lock_file(state_dir, project_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path), timeout=0)
        lock.acquire()
    except Timeout:
        raise MiddleError(f"another `middle memory import` of project {project_id!r} is running "
                          f"(it holds {path}): wait for it to finish, then run this one again "
                          "(it adds only what is still missing)") from None
    except OSError as exc:
        raise MiddleError(f"cannot lock {path} ({exc.strerror or exc}): check that directory's "
                          "permissions (state_dir in middle.toml)") from None
    try:
        yield
    finally:
        lock.release()


def index_batches(memory: Any, project_id: str, records: Iterable[Record], advance: Advance,
                  after_batch: Callable[[int], None] | None = None) -> ImportReport:
    """Index `records` a batch at a time, skipping docs already in memory, so a rerun after a
    failure goes on where it stopped; a failure says how many were indexed before it."""
    report = ImportReport()
    for batch in _batches(records, BATCH):
        try:
            added = memory.index_new_records(project_id, batch)
        except MemoryStoreError as exc:
            raise MemoryStoreError(
                f"{exc}. {report.added} doc(s) were imported before this error; run the same "
                "import again to continue (docs already in memory are skipped)") from None
        point("import.indexed")  # the batch is in memory; its origins and the import record not yet
        report.read += len(batch)
        report.added += added
        report.already += len(batch) - added
        if after_batch is not None:
            after_batch(report.read)
        advance(len(batch))
    return report


def _batches(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    batch: list[Record] = []
    for record in records:
        batch.append(record)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
