"""Opening the SQLite ticket database while another process opens or closes it."""

import sqlite3

import pytest

from tickets.db import SqliteDatabase
from tickets.errors import StoreError


class _LockedAtFirst:
    """A connection whose first `journal_mode` switches report "database is locked", as SQLite
    does (without calling the busy handler) while another process recovers or checkpoints the WAL."""

    def __init__(self, conn: sqlite3.Connection, failures: int, message: str = "database is locked"):
        self._conn, self.failures, self.message, self.attempts = conn, failures, message, 0

    def execute(self, sql, *args):
        if "journal_mode" in sql:
            self.attempts += 1
            if self.attempts <= self.failures:
                raise sqlite3.OperationalError(self.message)
        return self._conn.execute(sql, *args)


def test_a_transiently_locked_file_is_retried_until_it_switches_to_wal(tmp_path):
    db = SqliteDatabase(tmp_path / "t.db")
    flaky = _LockedAtFirst(db._conn, failures=3)
    db._conn = flaky
    db._enter_wal()
    assert flaky.attempts == 4
    assert db.read("PRAGMA journal_mode")[0][0] == "wal"


def test_an_error_that_is_not_a_lock_is_not_retried(tmp_path):
    db = SqliteDatabase(tmp_path / "t.db")
    flaky = _LockedAtFirst(db._conn, failures=5, message="disk I/O error")
    db._conn = flaky
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        db._enter_wal()
    assert flaky.attempts == 1


def test_a_lock_that_outlasts_the_busy_timeout_is_a_store_error_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr("tickets.db.BUSY_TIMEOUT_MS", 200)
    path = tmp_path / "t.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE x(a)")
    holder.execute("BEGIN EXCLUSIVE")  # a rollback-journal database held exclusively: WAL cannot start
    try:
        with pytest.raises(StoreError, match=str(path)):
            SqliteDatabase(path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
