"""Rebuilding a backend's SQLite store of a project in place: built beside the live store, copied into
it in one SQLite transaction per file, journaled so that a rebuild killed half-way is rolled back or
finished by the next process that opens the project."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from orchestrator.errors import ConfigError, MemoryStoreError

log = logging.getLogger("middle.memory")

# Both live in the project's store directory; project ids never start with '.', and no
# backend's store_files do either.
JOURNAL_NAME = ".rebuild-journal.json"  # not ".reindex-*": the backups are deleted by that pattern
EPOCH_NAME = ".store-epoch"
BACKUP_PREFIX = ".reindex-"
STAGING_NAME = "new"  # the new store is built in <backup>/new/
SQLITE_HEADER = b"SQLite format 3\x00"
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


@dataclass
class Journal:
    """What a rebuild in progress has done: `phase` "build" (the live store is untouched: roll
    back) or "copy" (the new store is complete: finish copying it in)."""

    backend: str
    files: list[str]
    backup: str
    phase: str
    started: str

    @property
    def staging(self) -> str:
        return STAGING_NAME


def read_epoch(store: Path) -> str | None:
    """The token a rebuild of the project's store last wrote, or None (never rebuilt). A
    facade that opened the store under another token holds handles on the old contents."""
    path = store / EPOCH_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise MemoryStoreError(f"cannot read {path} ({exc}); check the directory's "
                               "permissions") from None
    try:
        return raw.decode("utf-8").strip() or None
    except UnicodeDecodeError:
        raise MemoryStoreError(
            f"the rebuild token {path} is damaged (not the text `middle memory reindex` writes): "
            "delete it; it only tells processes that have the store open to reopen it, and the "
            "store itself is not affected") from None


def check_rebuildable(store: Path, backend: str, files: list[str]) -> None:
    """Refuse store files that are not SQLite: only those can be replaced under open handles."""
    for name in files:
        path = store / name
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
        if head and head != SQLITE_HEADER:
            raise ConfigError(f"the {backend} store file {path} is damaged: its header is not "
                              "SQLite's, so nothing in it can be read, by `middle memory export` or "
                              "`reindex` either: restore the file from a backup, or move it away "
                              f"(e.g. `mv {path} {path}.damaged`) to start the project's memory afresh")


def rebuild(store: Path, backend: str, files: list[str],
            build: Callable[[Path], None]) -> Path:
    """Replace the store files `files` of `store` with ones `build(staging_dir)` writes, keeping
    a copy of the old ones in a new `.reindex-<time>` folder, which is returned. Call under the
    project's locks with the store closed in this process; other processes may keep it open."""
    for tmp in [*store.glob(f"{JOURNAL_NAME}.*.tmp"), *store.glob(f"{EPOCH_NAME}.*.tmp")]:
        tmp.unlink(missing_ok=True)  # left by a rebuild killed while writing one
    backup = _new_backup_name(store)
    journal = Journal(backend, files, backup.name, "build", time.strftime("%Y-%m-%d %H:%M:%S"))
    _write_journal(store, journal)  # first: whatever comes after it, a kill is found
    backup.mkdir()
    try:
        for name in files:  # the old store, whole (its -wal too), for the user to go back to
            _keep_copy(store / name, backup / name)
        staging = backup / STAGING_NAME
        staging.mkdir()
        build(staging)
        built = [n for n in files if (staging / n).is_file()]
        if not built:
            raise MemoryStoreError(f"rebuilding the {backend} store in {store} wrote none of "
                                   f"its files ({', '.join(files)}); the old store is unchanged")
        for name in built:
            _match_page_size(staging / name, backup / name)
            _continue_generation(staging / name, backup / name)
    except BaseException:  # the live store is untouched: undo the rest
        shutil.rmtree(backup, ignore_errors=True)
        (store / JOURNAL_NAME).unlink(missing_ok=True)
        raise
    journal.files, journal.phase = built, "copy"
    _write_journal(store, journal)
    _write_epoch(store)  # before the copy: a handle opened after it must reopen
    _finish(store, journal)
    return backup


def recover(store: Path) -> None:
    """Roll back or finish a rebuild of `store` that a killed process left (call under the
    project's locks, which a rebuild holds for its whole length: a journal seen here is one
    whose process died), and say so."""
    path = store / JOURNAL_NAME
    if not path.exists():
        return
    journal = _read_journal(path)
    backup = store / journal.backup
    if journal.phase == "build":
        shutil.rmtree(backup, ignore_errors=True)
        path.unlink()
        log.warning("an interrupted `middle memory reindex` of the %s store in %s (started %s) "
                    "was rolled back: the store is as it was before it; run the reindex again",
                    journal.backend, store, journal.started)
        return
    _finish(store, journal)
    log.warning("an interrupted `middle memory reindex` of the %s store in %s (started %s) was "
                "finished: the store is the rebuilt one; the old store's files are in %s",
                journal.backend, store, journal.started, backup)


def _finish(store: Path, journal: Journal) -> None:
    """Copy the built files into the live ones (again, if a killed run had begun: the same
    bytes), move the old store's companions (vector snapshots) aside, and drop the journal."""
    backup = store / journal.backup
    staging = backup / journal.staging
    for name in journal.files:
        if (staging / name).is_file():  # gone: a killed run had copied it and was cleaning up
            _copy_into(staging / name, store / name)
    for name in journal.files:
        stem = name.rsplit(".", 1)[0]
        for path in sorted(store.glob(f"{stem}*")):
            if path.is_file() and path.name not in journal.files and not any(
                    path.name == f + side for f in journal.files for side in SQLITE_SIDE_FILES):
                path.rename(backup / path.name)
    shutil.rmtree(staging, ignore_errors=True)
    (store / JOURNAL_NAME).unlink()


def _copy_db(source: Path, target: Path) -> None:
    """Copy a SQLite database with SQLite's backup API: one write transaction on `target`, so a
    process killed half-way leaves `target` as it was, and connections that other processes
    hold on `target` see the new contents at their next read (the file itself stays put:
    moving a SQLite file from under an open connection loses that connection's writes)."""
    src = sqlite3.connect(str(source), timeout=60)
    try:
        dst = sqlite3.connect(str(target), timeout=60)
        try:
            src.backup(dst)
        finally:
            dst.close()
    except sqlite3.Error as exc:
        raise MemoryStoreError(f"cannot copy the store file {source} to {target} ({exc}); "
                               "check the disk is not full and the directory writable") from None
    finally:
        src.close()


def _keep_copy(source: Path, target: Path) -> None:
    """The old store file kept for the user: through SQLite (a consistent copy), or, when SQLite
    cannot read it (the damage a reindex is rebuilding from), its bytes and -wal as they are."""
    try:
        _copy_db(source, target)
    except MemoryStoreError:
        target.unlink(missing_ok=True)
        for side in ("", "-wal"):
            if Path(f"{source}{side}").is_file():
                shutil.copyfile(f"{source}{side}", f"{target}{side}")


def _copy_into(source: Path, target: Path) -> None:
    """The built file copied into the live one in one SQLite transaction; a live file SQLite
    cannot write into (cut short: no transaction on it can work, and every process that has
    it open already fails on it) is replaced whole instead, beside its place then renamed.
    Processes reopen the store either way (the rebuild token changed before this)."""
    try:
        _copy_db(source, target)
        return
    except MemoryStoreError:
        if not _damaged(target):
            raise
    tmp = target.with_name(f".{target.name}.{os.getpid()}.replace")
    shutil.copyfile(source, tmp)
    for side in SQLITE_SIDE_FILES:  # the damaged file's journal must not be replayed on the new one
        Path(f"{target}{side}").unlink(missing_ok=True)
    os.replace(tmp, target)
    log.info("the damaged store file %s was replaced whole by the rebuilt one", target)


def _damaged(path: Path) -> bool:
    """Whether SQLite finds the file damaged."""
    try:
        with _connection(path) as conn:
            return conn.execute("PRAGMA quick_check(1)").fetchone()[0] != "ok"
    except sqlite3.DatabaseError:
        return True


def _continue_generation(new: Path, old: Path) -> None:
    """Stores on the built-in storage base keep `generation` and `changes_floor` in their meta
    table: every open instance, here or in another process, compares the generation it
    mirrors with them and catches up from the change log. The new store starts its own count,
    so it must continue past the old one with its log cut: then every mirror of the old
    contents reloads in full instead of catching up from another store's log. Stores
    without such meta are left as they are."""
    try:
        try:
            with _connection(old) as conn:
                old_gen = _meta_int(conn, "generation")
        except sqlite3.DatabaseError:  # a damaged old store: past any count it may have reached
            old_gen = int(time.time() * 1000)
        if old_gen is None:
            return
        with _connection(new) as conn:
            gen = old_gen + (_meta_int(conn, "generation") or 0) + 1
            conn.execute("BEGIN IMMEDIATE")
            for key in ("generation", "changes_floor"):
                conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, str(gen)))
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'changes'").fetchone():
                conn.execute("DELETE FROM changes")
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise MemoryStoreError(f"cannot carry the generation of {old} over to {new} ({exc}); "
                               "the old store is unchanged") from None


def _match_page_size(new: Path, old: Path) -> None:
    """Give the new file the old one's page size: SQLite cannot copy into a WAL database of
    another page size (a store made by an old SQLite may use 1024-byte pages)."""
    try:
        try:
            with _connection(old) as conn:
                size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        except sqlite3.DatabaseError:  # a damaged old store is replaced whole (see _copy_into)
            return
        with _connection(new) as conn:
            if int(conn.execute("PRAGMA page_size").fetchone()[0]) == size:
                return
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            conn.execute("PRAGMA journal_mode=DELETE")
            conn.execute(f"PRAGMA page_size={size}")
            conn.execute("VACUUM")
            conn.execute(f"PRAGMA journal_mode={mode}")
    except sqlite3.Error as exc:
        raise MemoryStoreError(f"cannot give {new} the page size of {old} ({exc}); the old "
                               "store is unchanged") from None


class _connection:
    def __init__(self, path: Path):
        self.conn = sqlite3.connect(str(path), timeout=60, isolation_level=None)

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc: Any) -> None:
        self.conn.close()


def _meta_int(conn: sqlite3.Connection, key: str) -> int | None:
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    try:
        return None if row is None else int(row[0])
    except (TypeError, ValueError):
        return None


def _new_backup_name(store: Path) -> Path:
    """A `.reindex-<time>` folder name not taken yet in `store`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        backup = store / f"{BACKUP_PREFIX}{stamp}{'' if n == 0 else f'-{n}'}"
        if not backup.exists():
            return backup
    raise MemoryStoreError(f"cannot name a backup folder in {store}: too many .reindex-* folders")


def _write_atomic(path: Path, text: str) -> None:
    """Write by rename, synced: a reader (or a process after a kill) sees the old or the new."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def _write_journal(store: Path, journal: Journal) -> None:
    _write_atomic(store / JOURNAL_NAME, json.dumps(asdict(journal)))


def _write_epoch(store: Path) -> None:
    _write_atomic(store / EPOCH_NAME, uuid.uuid4().hex)


def _read_journal(path: Path) -> Journal:
    """The journal, checked as untrusted input: plain names inside the store directory only."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        journal = Journal(**{k: raw[k] for k in ("backend", "files", "backup", "phase", "started")})
        names = [journal.backup, *journal.files]
        if (journal.phase not in ("build", "copy") or not journal.backup.startswith(BACKUP_PREFIX)
                or not all(isinstance(n, str) and n and "/" not in n and "\\" not in n
                           and n not in (".", "..") for n in names)
                or not isinstance(journal.backend, str) or not isinstance(journal.started, str)):
            raise ValueError("unexpected values")
        return journal
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MemoryStoreError(
            f"the reindex journal {path} is corrupt ({exc}): a `middle memory reindex` was "
            "interrupted and its state cannot be read; check the store files beside it and the "
            f"{BACKUP_PREFIX}* folders, then delete the journal") from None
