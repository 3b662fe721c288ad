"""Fixtures shared by every test folder: a real PostgreSQL server for the `postgres` tests, the
benchmark data of ../shared/data (skipped when it is absent, failed under CI, which has it), and
no installed third-party plugin unless a test asks (the `installed_plugins` marker or fixture)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from orchestrator.names import LOAD_PLUGINS_VARIABLE
from orchestrator.testing import postgres
from orchestrator.testing.plugins import installed_plugins, use_installed_plugins  # noqa: F401 (a fixture)

# The tests see the built-in plugins only, whatever is pip-installed beside them (as datasette's
# tests do): set before any registry is built, and inherited by the processes tests start.
os.environ[LOAD_PLUGINS_VARIABLE] = ""

# The Python processes the tests start write no bytecode, on every machine (as on CI images, which
# set this): a test's project is laid out, checked and edited within one second, and a .pyc keyed
# by the source's whole-second mtime and size then hides an edit of the same length (the gate read
# a ticket's fix as the base's failure). Set here, so a developer's `pytest` runs as CI's does.
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"

# ...but the product's own modules are compiled once per session (by the first process, not by each
# xdist worker), beside their sources: without it each `middle` a test starts compiled every module
# it imports, a quarter of its start-up. As checked-hash .pyc files (PEP 552), which Python reads
# only when they hold the hash of the source as it is now, so no edit can hide behind one.
if "PYTEST_XDIST_WORKER" not in os.environ:
    import compileall
    import py_compile

    import backends
    import orchestrator
    import tickets

    for _package in (orchestrator, backends, tickets):
        compileall.compile_dir(os.path.dirname(_package.__file__ or ""), quiet=2,
                               invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)

# Ctrl-C reaches the processes the tests start (the tests of what `middle` does on Ctrl-C send
# it SIGINT): a suite started as a background job of a shell without job control (`pytest &` in
# a script, a CI step run that way) inherits SIGINT ignored, and Python keeps an ignored SIGINT
# ignored, in this process and in every process it starts. A handled one is reset on exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The full kill-point sweeps (a run's, tests/graph/test_killpoints.py; the memory commands',
    merge's and revert's, tests/cli/test_memory_killpoints.py and tests/workspace/test_merge_killed.py)
    run only when asked for: `pytest -m killsweep`. Here, not in one folder's conftest, so a run
    of any folder leaves them out."""
    if "killsweep" in (config.option.markexpr or ""):
        return
    swept = [item for item in items if item.get_closest_marker("killsweep")]
    if swept:
        config.hook.pytest_deselected(items=swept)
        items[:] = [item for item in items if not item.get_closest_marker("killsweep")]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the cores. A quarter of the suite's wall time is spent
    waiting on the real processes the tests start (Claude Code, the other agents' CLIs, git,
    PostgreSQL): on 2 cores two workers kept them 74% busy (1,173 CPU-s over 793 s)."""
    return (os.cpu_count() or 1) + 1


@pytest.fixture(autouse=True)
def _installed_plugins_marker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """`@pytest.mark.installed_plugins` loads every installed plugin for that test."""
    if request.node.get_closest_marker("installed_plugins"):
        use_installed_plugins(monkeypatch)


@pytest.fixture(autouse=True)
def _no_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pricing asks whether a base URL's host name is local (coding_agent/local_host.py): in the
    suite, the hosts file answers, never the network."""
    from orchestrator.coding_agent import local_host

    monkeypatch.setattr(local_host, "default_resolver", local_host.hosts_file_resolver)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[postgres.PostgresServer]:
    why = postgres.available()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but {why}")
        pytest.skip(why)
    server = postgres.start_server()
    try:
        if not os.environ.get(postgres.URL_VARIABLE):  # never retune a server the user named
            _no_sync(server)
        yield server
    finally:
        server.stop()


def _no_sync(server: postgres.PostgresServer) -> None:
    """The session's own server does not wait for the disk: no fsync, no synchronous commit, no
    full-page writes (each test's CREATE DATABASE and every commit waited for it: a fifth of the
    postgres tests' time). Only a crash of the machine could lose data, and the server is thrown
    away after the session; a clean stop or restart (PostgresServer.down/restart) still writes it
    all. Nothing of the product changes: its benchmarks' servers (bench runner, fleet) keep fsync."""
    import psycopg

    with psycopg.connect(server.admin_url, autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")  # kept in its data dir across restarts
        conn.execute("SELECT pg_reload_conf()")


@pytest.fixture
def pg_url(pg_server: postgres.PostgresServer) -> Iterator[str]:
    """A fresh, empty database on the session's server, dropped after the test."""
    url = pg_server.create_database()
    yield url
    pg_server.drop_database(url)


def require_shared_data(path: Path) -> Path:
    """`path` (under ../shared/data) when it exists; else skip the test, or fail it under CI,
    which always lays shared/ beside the clone (a clone on its own still passes its tests)."""
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but {path} is missing; CI lays shared/data beside the clone")
        pytest.skip(f"{path} is not here (the shared benchmark data beside the clone)")
    return path


@pytest.fixture
def shared_data() -> Callable[[str], Path]:
    """shared_data("musique100") -> ../shared/data/musique100, or skip (fail under CI) without it."""
    from orchestrator.bench.datasets import SHARED_DATA

    return lambda relative: require_shared_data(SHARED_DATA / relative)


# Every engine the ticket store runs on; a test that takes `store_target` runs on each.
ENGINES = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=ENGINES)
def store_target(request: pytest.FixtureRequest, tmp_path) -> str:
    """Where a ticket store lives: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "postgres":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "db" / "tickets.sqlite")


@pytest.fixture
def minilm_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts MiniLM embeds on their own during the test (a passage's one reading is not one):
    the late-chunking tests of hipporag and hindsight assert it stays empty."""
    from backends.retrieval.embedders import minilm

    calls: list[str] = []
    original = minilm.MiniLMEmbedder._embed
    def embed(self: Any, texts: list[str], *a: Any) -> Any:
        calls.extend(texts)
        return original(self, texts, *a)

    monkeypatch.setattr(minilm.MiniLMEmbedder, "_embed", embed)
    return calls


@pytest.fixture
def local_window_registry() -> Any:
    """A plugin registry with `local_window`: a backend that cannot keep its store in a database
    (`shares_database = False`), as a plugin's may not."""
    from backends.sliding_window import SlidingWindowBackend
    from orchestrator.plugin_api import hookimpl
    from orchestrator.plugins.manager import PluginRegistry

    class LocalWindow(SlidingWindowBackend):
        name = "local_window"
        shares_database = False

    class LocalPlugin:
        @hookimpl
        def register_memory_backends(self, register: Any) -> None:
            register(LocalWindow)

    return PluginRegistry(load_entry_points=False, extra_plugins=(LocalPlugin(),))

