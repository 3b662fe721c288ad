"""The one SQLite transaction pattern every built-in backend store uses: all-or-nothing writes, consistent reads."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Callable, Iterator

ErrorFactory = Callable[[sqlite3.Error, str], Exception]


@contextmanager
def write_tx(conn: sqlite3.Connection, error: ErrorFactory) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT (another process waits rather than races); rolled back on any
    error, COMMIT's own included, so a failed write changes nothing. The caller holds its lock."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise error(exc, "write failed in") from exc


@contextmanager
def read_tx(conn: sqlite3.Connection, error: ErrorFactory) -> Iterator[sqlite3.Connection]:
    """One deferred transaction: every SELECT in it sees the same committed state."""
    try:
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise error(exc, "read failed in") from exc
