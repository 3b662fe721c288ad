"""Where the ticket store's rows live: one SQLite file (the embedded default) or PostgreSQL.

The store's SQL is written once, with `?` placeholders, in the subset both engines speak
(upserts with ON CONFLICT, RETURNING); the few differences are attributes of the database
object (`skip_locked`, `lock_row`, `order_col`) and its schema. A `Database` gives:

- `write()`: one transaction (SQLite: BEGIN IMMEDIATE, so writers queue instead of failing;
  PostgreSQL: a pooled connection's transaction), rolled back on any error;
- `read(sql, params)`: rows for a query;
- `notify(conn, event_id)` / `wait(timeout)`: run events pushed to followers, and
  `notify_runnable(conn)` / `wait_runnable(timeout)`: "a ticket became runnable" pushed to idle
  workers, on a channel of its own so run events never wake them (PostgreSQL's LISTEN/NOTIFY;
  SQLite has no push, so a follower or worker sleeps and polls);
- every engine error as one StoreError that names the database and says what to do.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Protocol, Sequence

from tickets.errors import StoreError, StoreUnavailable


def _log():  # -> logging.Logger; imported on the rare warning: `middle tickets` starts without it
    import logging

    return logging.getLogger("middle.store")

BUSY_TIMEOUT_MS = 30_000
EVENTS_CHANNEL = "middle_events"
RUNNABLE_CHANNEL = "middle_runnable"  # a ticket became runnable: the only news that wakes idle workers
# "mevt": with the ticket's hash, the lock that orders one ticket's run events (never the database's)
EVENTS_LOCK_KEY = 0x6D657674
RECONNECT_S = 60.0  # how long a PostgreSQL call keeps retrying while the server is unreachable


class Row:
    """One result row, by column name or position (as sqlite3.Row, for both engines)."""

    __slots__ = ("_names", "_values")

    def __init__(self, names: Sequence[str], values: Sequence[Any]):
        self._names, self._values = tuple(names), tuple(values)

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, int):
            return self._values[key]
        try:
            return self._values[self._names.index(key)]
        except ValueError:
            raise IndexError(f"no column {key!r}") from None

    def keys(self) -> list[str]:
        return list(self._names)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Row({dict(zip(self._names, self._values))!r})"


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor: ...


def is_postgres(url: str | Path) -> bool:
    return str(url).startswith(("postgresql://", "postgres://"))


def redact(url: str) -> str:
    """A database URL fit for messages: its password (in the address or, as libpq also takes it,
    in `?password=`) replaced by ***."""
    from urllib.parse import parse_qsl, urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}:***@{host}")
    if "password" in parts.query:
        query = [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query)]
        parts = parts._replace(query="&".join(f"{k}={v}" for k, v in query))
    return urlunsplit(parts)


# -- SQLite ------------------------------------------------------------------------------------


class SqliteDatabase:
    """One SQLite file (WAL), one connection guarded by a lock, shared by threads and processes."""

    dialect = "sqlite"
    skip_locked = ""  # BEGIN IMMEDIATE already makes writers take turns
    lock_row = ""
    share_row = ""
    order_col = "rowid"  # insertion order, the tie-break for equal timestamps
    # The database's clock as the store's timestamp text: leases are set and compared with it,
    # never with one machine's clock (one file has one clock; see PostgresDatabase for the fleet).
    now_sql = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    # The same clock as a stored timestamp (`utc_now`'s text: microseconds, +00:00), for the times
    # of runs and turns: one clock orders a dependency's end before its dependent's start.
    stamp_sql = "strftime('%Y-%m-%dT%H:%M:%f000+00:00', 'now')"

    @staticmethod
    def lease_sql(lease_s: float) -> str:
        """The database's clock `lease_s` seconds from now (a float we format: no user input)."""
        return f"strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '{float(lease_s):+.3f} seconds')"

    def __init__(self, path: str | Path, *, readonly: bool = False):
        from tickets.errors import TicketError

        self.path = Path(path).expanduser().resolve()
        self.where = str(self.path)
        self.readonly = readonly
        # sqlite3 connections are not safe to use from two threads at once, and one connection
        # keeps a thread's writes visible to the others.
        self._lock = threading.RLock()
        try:
            if readonly:
                if not self.path.is_file():
                    raise TicketError(f"no ticket database at {self.path} yet: `middle run` creates it")
                target, uri = f"file:{self.path}?mode=ro", True
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                target, uri = str(self.path), False
            # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so a writer takes the
            # write lock up front and waits (busy_timeout) instead of failing mid-transaction.
            self._conn = sqlite3.connect(target, uri=uri, check_same_thread=False, isolation_level=None,
                                         timeout=BUSY_TIMEOUT_MS / 1000)
        except (OSError, sqlite3.Error) as err:
            raise self.open_error(err) from err
        try:
            self._conn.row_factory = sqlite3.Row
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if not readonly:
                self._enter_wal()
            self._conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as err:
            self._conn.close()
            raise self.open_error(err) from err

    def _enter_wal(self) -> None:
        """Switch to WAL, waiting out another process that is opening or closing the same file.

        SQLite does not call the busy handler while another connection runs WAL recovery or the
        last connection's checkpoint-and-delete of the -wal file (both happen when processes
        start and stop together, as two `middle run`s do), so "database is locked" can come back
        at once; those windows are short, so retry until the busy timeout.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        delay = 0.01
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as err:
                transient = "locked" in str(err) or "busy" in str(err)
                if not transient or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.25)

    def open_error(self, err: BaseException) -> StoreError:
        if isinstance(err, sqlite3.DatabaseError) and not isinstance(err, sqlite3.OperationalError):
            return self.corrupt(err)
        return StoreError(
            f"cannot open the ticket database at {self.path}: {err}; "
            "check that the directory is writable and the file is a middle-agent database")

    def corrupt(self, err: BaseException) -> StoreError:
        return StoreError(
            f"the ticket database at {self.path} is unreadable ({err}): it is corrupt or not a "
            "middle-agent database. Move it away and run again: tickets reload from the ticket "
            "folder (the run history in the old file is not carried over)")

    def error(self, err: BaseException) -> BaseException:
        if isinstance(err, sqlite3.ProgrammingError):  # our bug (e.g. a closed store), not the file's
            return err
        if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
            return StoreError(
                f"the ticket database at {self.path} stayed locked by another process for "
                f"{BUSY_TIMEOUT_MS // 1000}s: wait for the other `middle` command, then try again")
        if isinstance(err, sqlite3.OperationalError) and "readonly" in str(err).replace("-", ""):
            return StoreError(f"the ticket database at {self.path} is read-only: check its permissions")
        return self.corrupt(err)

    @contextmanager
    def write(self) -> Iterator[Connection]:
        if self.readonly:
            raise StoreError(f"the ticket database at {self.path} was opened read-only")
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as err:
                raise self.error(err) from None
            try:
                yield self._conn  # type: ignore[misc]
            except sqlite3.DatabaseError as err:
                self._conn.execute("ROLLBACK")
                raise self.error(err) from None
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.DatabaseError as err:
                raise self.error(err) from None

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._conn.execute(sql, tuple(params)).fetchall()
            except sqlite3.DatabaseError as err:
                raise self.error(err) from None

    def columns(self, conn: Connection, table: str) -> set[str]:
        return {r[1] for r in conn.execute(f"PRAGMA table_info({table})").fetchall()}

    def order_events(self, conn: Connection, ticket_id: str) -> None:
        """Nothing to do: BEGIN IMMEDIATE lets one writer at a time commit, so event ids become
        visible in order."""

    def notify(self, conn: Connection, event_id: int) -> None:
        """No push in SQLite: followers poll (see wait)."""

    def notify_runnable(self, conn: Connection) -> None:
        """No push in SQLite: idle workers poll (see wait_runnable)."""

    def wait(self, timeout: float) -> bool:
        """Sleep `timeout` (a follower then reads what is new); False: nothing was pushed."""
        time.sleep(timeout)
        return False

    def wait_runnable(self, timeout: float) -> bool:
        """Sleep `timeout` (an idle worker then looks for work); False: nothing was pushed."""
        time.sleep(timeout)
        return False

    def resize(self, connections: int) -> None:
        """One connection whatever the load: nothing to size."""

    def runnable_seen(self) -> int:
        return 0  # nothing is pushed

    def close(self) -> None:
        with self._lock:
            self._conn.close()


# -- PostgreSQL --------------------------------------------------------------------------------


def _pg_rows(cursor: Any) -> Any:
    names = [c.name for c in cursor.description] if cursor.description else []
    return lambda values: Row(names, values)


class _PgConnection:
    """A psycopg connection that speaks the store's `?` placeholders."""

    def __init__(self, conn: Any):
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(_pg_sql(sql), tuple(params))


def _pg_sql(sql: str) -> str:
    # The store's SQL has no literal '?' or '%', so this translation is exact.
    return sql.replace("%", "%%").replace("?", "%s")


_NO_DATABASE = re.compile(r'database "([^"]+)" does not exist')


def _missing_database(url: str, reconnect_s: float) -> str | None:
    """The database `url` names when the server answers that it does not exist, else None (it
    exists, or the server is out of reach: the pool then retries for [store] reconnect_s). One
    connection, closed at once: a missing database is a mistake to say now, not an outage to
    wait out. psycopg gives no SQLSTATE for a failed connection, so its message is read."""
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=max(1, min(int(reconnect_s), 10))).close()
    except psycopg.OperationalError as err:
        found = _NO_DATABASE.search(str(err))
        return found.group(1) if found else None
    return None


class PostgresDatabase:
    """A PostgreSQL database through a psycopg 3 connection pool, shared by threads and machines.

    A call that finds the server unreachable (a restart, a network blip) is retried with backoff
    for up to `reconnect_s` ([store] reconnect_s); a transaction that failed is retried whole, never half.
    """

    dialect = "postgres"
    skip_locked = " FOR UPDATE SKIP LOCKED"  # a runner skips the row another is claiming
    lock_row = " FOR UPDATE"
    share_row = " FOR SHARE"  # a fenced write holds the claim row: a takeover waits for its commit
    order_col = "seq"
    # The server's clock, shared by every machine of the fleet: a lease is set and judged by it,
    # so a worker whose clock runs ahead or behind neither keeps a dead claim nor steals a live one.
    now_sql = """to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""
    # The server's clock as a stored timestamp (`utc_now`'s text), for the times of runs and
    # turns: machines whose clocks disagree still record a dependency's end before its dependent's start.
    stamp_sql = """to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')"""

    @staticmethod
    def lease_sql(lease_s: float) -> str:
        """The server's clock `lease_s` seconds from now (a float we format: no user input)."""
        return ("to_char(clock_timestamp() AT TIME ZONE 'UTC' + interval "
                f"""'{float(lease_s):.3f} seconds', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')""")

    def __init__(self, url: str, *, readonly: bool = False, min_size: int = 1, max_size: int = 16,
                 reconnect_s: float = RECONNECT_S):
        # The process's one pool: the checkpointer shares it (orchestrator/running/checkpoints.py),
        # so its connections are autocommit (a store write still opens its own transaction) and
        # rows come as the store's Row unless a cursor asks otherwise (the checkpointer does).
        try:
            import psycopg  # noqa: F401
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise StoreError("a postgresql:// store needs psycopg: pip install 'middle-agent[postgres]'") from None
        self.url = url
        self.where = redact(url)
        self.readonly = readonly
        self.reconnect_s = reconnect_s
        self._listen_lock = threading.Condition()
        self._listener: threading.Thread | None = None
        # Notifications seen so far per channel (waiters compare before and after).
        self._notified = {EVENTS_CHANNEL: 0, RUNNABLE_CHANNEL: 0}
        self._closed = False
        missing = _missing_database(url, reconnect_s)
        if missing is not None:  # no wait for a server that answers: the database is not there
            raise StoreError(f"the PostgreSQL server at {self.where} has no database {missing!r}: "
                             f"create it (e.g. `createdb {missing}`) or fix [store] url (or MIDDLE_STORE_URL)")
        self.pool = ConnectionPool(url, min_size=min_size, max_size=max_size, open=False,
                                   kwargs={"row_factory": _pg_rows, "autocommit": True,
                                           "application_name": f"middle-{os.getpid()}"},
                                   check=ConnectionPool.check_connection, name="middle-store")
        try:
            self._reach()
            self.pool.open(wait=True, timeout=reconnect_s)
        except StoreUnavailable:
            self.pool.close()
            raise
        except Exception as err:
            self.pool.close()
            raise self.unreachable(err) from None

    def _reach(self) -> None:
        """Reach the server once before the pool opens, retrying for at most `reconnect_s`: an
        unreachable store is then one error that says why (the pool says only that it timed
        out, and logs each of its tries; the CLI keeps those quiet)."""
        import psycopg

        deadline = time.monotonic() + self.reconnect_s
        delay = 0.2
        while True:
            left = deadline - time.monotonic()
            try:
                psycopg.connect(self.url, connect_timeout=max(1, min(10, round(left))),
                                application_name=f"middle-{os.getpid()}").close()
                return
            except psycopg.OperationalError as err:
                if time.monotonic() + delay >= deadline:
                    raise self.unreachable(err, after=self.reconnect_s) from None
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def unreachable(self, err: BaseException, after: float | None = None) -> StoreError:
        """The one error of a store out of reach (`after`: how long it was tried, [store] reconnect_s)."""
        said = (str(err).strip().splitlines() or [type(err).__name__])[0]  # libpq's hint follows on a line of its own
        tried = f" after {after:g} sec of tries" if after is not None else ""
        return StoreUnavailable(f"cannot reach the PostgreSQL store at {self.where}{tried} ({said}): "
                          "check [store] url (or MIDDLE_STORE_URL) and that the server is running")

    def error(self, err: BaseException) -> BaseException:
        import psycopg

        if isinstance(err, psycopg.errors.TransactionRollback):  # a deadlock: the server was reached
            return StoreError(f"the PostgreSQL store at {self.where} rolled back a transaction "
                              f"({str(err).strip().splitlines()[0]}): try again")
        if isinstance(err, psycopg.OperationalError):
            return self.unreachable(err)
        if isinstance(err, psycopg.errors.InsufficientPrivilege):
            return StoreError(f"the PostgreSQL store at {self.where} refused the operation ({err}): "
                              "grant the store's user rights on its tables")
        if isinstance(err, psycopg.Error):
            return StoreError(f"the PostgreSQL store at {self.where} failed: {str(err).strip()}")
        return err

    def _retrying(self, fn: Any) -> Any:
        import psycopg

        deadline = time.monotonic() + self.reconnect_s
        delay = 0.2
        while True:
            try:
                return fn()
            except (psycopg.OperationalError, _PoolTimeout()) as err:
                if time.monotonic() >= deadline:
                    raise self.unreachable(err) from None
                _log().warning("the PostgreSQL store at %s is unreachable (%s); retrying", self.where, err)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
            except psycopg.Error as err:
                raise self.error(err) from None

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One transaction on a pooled connection. Getting a live connection is retried while the
        server is unreachable (a restart); a failure inside the transaction rolls it back and is
        reported, never half applied."""
        import psycopg

        if self.readonly:
            raise StoreError(f"the ticket store at {self.where} was opened read-only")
        conn = self._retrying(lambda: self.pool.getconn(timeout=self.reconnect_s))
        try:
            with conn.transaction():
                yield _PgConnection(conn)
        except psycopg.Error as err:
            raise self.error(err) from None
        finally:
            self.pool.putconn(conn)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        def run() -> list[Any]:
            with self.pool.connection() as conn:  # autocommit: one statement, its own snapshot
                return conn.execute(_pg_sql(sql), tuple(params)).fetchall()
        return self._retrying(run)

    def statement(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """One writing statement in a transaction of its own (autocommit: no BEGIN and COMMIT
        round trips), its rows; a claim of the queue is one (tickets/queue.py). As in `write`,
        getting a live connection is retried, the statement never (it may have committed)."""
        import psycopg

        if self.readonly:
            raise StoreError(f"the ticket store at {self.where} was opened read-only")
        conn = self._retrying(lambda: self.pool.getconn(timeout=self.reconnect_s))
        try:
            return conn.execute(_pg_sql(sql), tuple(params)).fetchall()
        except psycopg.Error as err:
            raise self.error(err) from None
        finally:
            self.pool.putconn(conn)

    def columns(self, conn: Connection, table: str) -> set[str]:
        rows = conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ?",
                            (table,)).fetchall()
        return {r[0] for r in rows}

    def order_events(self, conn: Connection, ticket_id: str) -> None:
        """Hold the ticket's run-event lock until this transaction ends (commit or rollback), so
        the next event of the same ticket draws its id only after this one is visible: a ticket's
        (and so a run's) event ids become visible in order, and a reader tailing a run or a
        ticket that has seen id N has seen every one of its events below N. Events of other
        tickets take other locks and commit side by side. Taken just before the insert, at the
        end of its transaction, so it is held for the commit alone."""
        conn.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (EVENTS_LOCK_KEY, ticket_id))

    def notify(self, conn: Connection, event_id: int) -> None:
        """Delivered to every listener when the transaction commits (LISTEN/NOTIFY)."""
        conn.execute("SELECT pg_notify(?, ?)", (EVENTS_CHANNEL, str(event_id)))

    def notify_runnable(self, conn: Connection) -> None:
        """Wake idle workers when this transaction commits: a ticket may be claimed now."""
        conn.execute("SELECT pg_notify(?, '')", (RUNNABLE_CHANNEL,))

    def wait(self, timeout: float) -> bool:
        """Block until a run event is committed anywhere (True), or `timeout` passes (False)."""
        return self._wait(EVENTS_CHANNEL, timeout)

    def wait_runnable(self, timeout: float) -> bool:
        """Block until a ticket becomes runnable anywhere (True), or `timeout` passes (False):
        run events do not end this wait."""
        return self._wait(RUNNABLE_CHANNEL, timeout)

    def resize(self, connections: int) -> None:
        """At most `connections` pooled connections (a worker: one per ticket it runs at once)."""
        self.pool.resize(min_size=1, max_size=max(1, connections))

    def runnable_seen(self) -> int:
        """"Runnable" notifications had so far (the listener starts listening on the first call)."""
        with self._listen_lock:
            self._listen()
            return self._notified[RUNNABLE_CHANNEL]

    def _listen(self) -> None:
        if self._listener is None:
            self._listener = threading.Thread(target=self._listen_forever, name="middle-listen", daemon=True)
            self._listener.start()

    def _wait(self, channel: str, timeout: float) -> bool:
        """One listener thread per store holds the LISTEN connection and wakes every waiter of a
        channel (the CLI's follower, each SSE stream, an idle worker) on its notifications."""
        with self._listen_lock:
            self._listen()
            seen = self._notified[channel]
            self._listen_lock.wait_for(lambda: self._notified[channel] != seen or self._closed, timeout)
            return self._notified[channel] != seen

    def _listen_forever(self) -> None:
        import psycopg

        while not self._closed:
            try:
                with psycopg.connect(self.url, autocommit=True, application_name=f"middle-{os.getpid()}") as conn:
                    conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                    conn.execute(f"LISTEN {RUNNABLE_CHANNEL}")
                    while not self._closed:
                        channels = {n.channel for n in conn.notifies(timeout=1.0, stop_after=1)}
                        if channels:
                            with self._listen_lock:
                                for channel in channels:
                                    self._notified[channel] = self._notified.get(channel, 0) + 1
                                self._listen_lock.notify_all()
            except psycopg.Error as err:  # the server went away: waiters time out (a poll) until back
                if not self._closed:
                    _log().warning("listening for run events at %s failed (%s); retrying", self.where, err)
                    time.sleep(1.0)

    def close(self) -> None:
        with self._listen_lock:
            self._closed = True
            self._listen_lock.notify_all()
        self.pool.close()


def _PoolTimeout() -> type[BaseException]:
    from psycopg_pool import PoolTimeout

    return PoolTimeout


def postgres_ddl(statement: str) -> str:
    """A SQLite DDL statement of the store in PostgreSQL's words: one schema, written once."""
    st = statement.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY")
    st = st.replace(" REAL", " DOUBLE PRECISION")
    if st.startswith("CREATE TABLE IF NOT EXISTS runs ("):  # SQLite orders ties by rowid
        st = st.replace("(", "(\n    seq BIGSERIAL,", 1)
    return st


def open_database(target: str | Path, *, readonly: bool = False,
                  reconnect_s: float = RECONNECT_S) -> SqliteDatabase | PostgresDatabase:
    """A PostgreSQL database for a postgresql:// URL, else the SQLite file at that path."""
    if is_postgres(target):
        return PostgresDatabase(str(target), readonly=readonly, reconnect_s=reconnect_s)
    return SqliteDatabase(target, readonly=readonly)


def and_equal(sql: str, params: list[Any], filters: dict[str, Any]) -> str:
    """`sql` with ` AND column = ?` for each filter whose value is not None (appended to `params`).
    The columns are the caller's constants, never user input."""
    for column, value in filters.items():
        if value is not None:
            sql += f" AND {column} = ?"
            params.append(value)
    return sql
