"""The memory facade with `[memory] url` on PostgreSQL: stores in the database, the project's
advisory lock across machines, many writers on one project, per-machine backends left alone."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import psycopg
import pytest
from test_facade_two_processes import PROJECT, measure

from orchestrator.config.settings import Config
from orchestrator.memory.facade import MemoryFacade
from orchestrator.plugin_api import MemoryStoreError
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.testing.samples import sample_doc

pytestmark = pytest.mark.postgres
HASHING = {"embedder": "hashing"}


def facade(save_dir, url, backend="hybrid", options=HASHING, **kwargs) -> MemoryFacade:
    return MemoryFacade(save_dir, backend, options, PluginRegistry(load_entry_points=False),
                        url=url, **kwargs)


def test_eight_processes_on_one_project_lose_nothing_and_duplicate_nothing(pg_url):
    # 8 processes (each its own save_dir: a machine) x 20 docs of their own, a fifth of them
    # deleted again, plus 10 docs that all 8 index.
    result = measure("hybrid", processes=8, threads=1, docs=20, plugins=(), options=HASHING,
                     url=pg_url, common=10)
    assert result["exit_codes_nonzero"] == 0, "a worker process failed: see its stderr above"
    assert result["keep_docs"] == 170
    assert (result["lost"], result["resurrected"], result["duplicated"]) == (0, 0, 0), result


def test_the_store_is_in_the_database_not_under_save_dir(tmp_path, pg_url):
    memory = facade(tmp_path / "a", pg_url)
    assert not memory.has_store(PROJECT)
    assert memory.retrieve(PROJECT, ["anything"], if_exists=True)[0]["docs"] == []
    memory.index(PROJECT, [sample_doc(1), sample_doc(2)])
    assert not (memory.store_dir(PROJECT) / "hybrid.sqlite3").exists()
    other_machine = facade(tmp_path / "b", pg_url)
    assert other_machine.has_store(PROJECT)
    assert other_machine.list_docs(PROJECT) == [sample_doc(1), sample_doc(2)]
    assert other_machine.delete(PROJECT, [sample_doc(1)]) == 1
    assert memory.retrieve(PROJECT, [sample_doc(1)], 5)[0]["docs"] == [sample_doc(2)]
    database_name = pg_url.split("?")[0].rsplit("/", 1)[1]
    assert f"/{database_name}" in memory.where(PROJECT) and "project 'shared'" in memory.where(PROJECT)
    memory.close()
    other_machine.close()


def test_backends_that_cannot_share_keep_their_store_per_machine(tmp_path, pg_url, local_window_registry):
    registry = local_window_registry
    memory = MemoryFacade(tmp_path, "local_window", {}, registry, url=pg_url)
    assert memory.url is None
    memory.index(PROJECT, [sample_doc(1)])
    assert (memory.store_dir(PROJECT) / "sliding_window.sqlite3").exists()
    assert memory.lock_path(PROJECT).exists()  # the file lock, as without a url
    memory.close()


# Every built-in backend keeps its store in the database: hipporag, hindsight and sliding_window
# too (a schema of their own), so a fleet has one memory per project.
SCHEMA_BACKENDS = {"hipporag": HASHING, "hindsight": HASHING, "sliding_window": {}}


def _index_as_host(host: str, save_dir: str, url: str, backend: str, docs: list[str]) -> None:
    """Another machine: its own MIDDLE_HOSTNAME and state directory, the same database."""
    os.environ["MIDDLE_HOSTNAME"] = host
    memory = facade(save_dir, url, backend=backend, options=SCHEMA_BACKENDS[backend])
    memory.index(PROJECT, docs)
    memory.flush()
    memory.close()


def _on_host(host: str, save_dir, url: str, backend: str, docs: list[str]) -> None:
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=_index_as_host, args=(host, str(save_dir), url, backend, docs))
    child.start()
    child.join(300)
    assert child.exitcode == 0, f"the process of {host} failed (see its stderr above)"


@pytest.mark.parametrize("backend", sorted(SCHEMA_BACKENDS))
def test_every_backend_is_one_memory_for_the_fleet(tmp_path, pg_url, backend, monkeypatch):
    monkeypatch.setenv("MIDDLE_HOSTNAME", "host-b")
    here = facade(tmp_path / "b", pg_url, backend=backend, options=SCHEMA_BACKENDS[backend])
    assert here.retrieve(PROJECT, ["anything"], if_exists=True)[0]["docs"] == []
    here.index(PROJECT, [sample_doc(1)])  # open here, mirrors loaded, before the other host writes
    _on_host("host-a", tmp_path / "a", pg_url, backend, [sample_doc(2)])
    assert here.list_docs(PROJECT) == [sample_doc(1), sample_doc(2)]
    (result,) = here.retrieve(PROJECT, [sample_doc(2)], 5)
    assert any(sample_doc(2) in doc for doc in result["docs"]), result
    assert not any(p.name.endswith(".sqlite3") for p in (tmp_path / "a").rglob("*")), \
        "the other host's store is in its state directory, not in the database"
    assert here.delete(PROJECT, [sample_doc(2)]) == 1
    other = facade(tmp_path / "a", pg_url, backend=backend, options=SCHEMA_BACKENDS[backend])
    assert other.list_docs(PROJECT) == [sample_doc(1)]
    here.close()
    other.close()


@pytest.mark.parametrize("backend", ["hybrid", "hindsight"])
def test_reads_do_not_wait_for_a_writer_on_another_machine(tmp_path, pg_url, backend):
    options = {"embedder": "hashing"}
    memory = facade(tmp_path / "b", pg_url, backend=backend, options=options, lock_timeout_s=1.0)
    memory.index(PROJECT, [sample_doc(1)])
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    child = ctx.Process(target=_hold_lock_forever, args=(str(tmp_path / "a"), pg_url, ready))
    child.start()
    try:
        assert ready.wait(60)
        # The other machine holds the project's write lock: reads go on, a write waits its turn.
        assert memory.retrieve(PROJECT, [sample_doc(1)], 5)[0]["docs"] == [sample_doc(1)]
        assert memory.list_docs(PROJECT) == [sample_doc(1)]
        assert memory.has_doc(PROJECT, sample_doc(1))
        with pytest.raises(MemoryStoreError, match="advisory lock"):
            memory.index(PROJECT, [sample_doc(2)])
    finally:
        child.kill()
        child.join(30)
    memory.close()


def test_two_machines_take_turns_through_the_advisory_lock(tmp_path, pg_url):
    holder = facade(tmp_path / "a", pg_url)
    waiter = facade(tmp_path / "b", pg_url, lock_timeout_s=1.0)  # another save_dir: no file in common
    with holder.project_lock(PROJECT, "test"):
        with pytest.raises(MemoryStoreError, match="advisory lock"):
            waiter.index(PROJECT, [sample_doc(1)])
        holder.list_docs(PROJECT)  # the holder's own thread goes on under its lock
    waiter.index(PROJECT, [sample_doc(1)])
    assert holder.list_docs(PROJECT) == [sample_doc(1)]
    holder.close()
    waiter.close()


def _hold_lock_forever(save_dir: str, url: str, ready) -> None:
    memory = facade(save_dir, url)
    with memory.project_lock(PROJECT, "test"):
        ready.set()
        time.sleep(600)


def test_a_killed_process_leaves_no_stale_lock(tmp_path, pg_url):
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    child = ctx.Process(target=_hold_lock_forever, args=(str(tmp_path / "a"), pg_url, ready))
    child.start()
    try:
        assert ready.wait(60)
        memory = facade(tmp_path / "b", pg_url, lock_timeout_s=1.0)
        with pytest.raises(MemoryStoreError, match="advisory lock"):
            memory.index(PROJECT, [sample_doc(1)])
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
        memory = facade(tmp_path / "b", pg_url, lock_timeout_s=30.0)
        memory.index(PROJECT, [sample_doc(1)])  # the server dropped the dead session's lock
        assert memory.list_docs(PROJECT) == [sample_doc(1)]
        memory.close()
    finally:
        if child.is_alive():
            child.kill()


def test_memory_url_defaults_to_a_postgresql_store_url():
    assert Config(store={"url": "postgresql://db/x"}).memory_url == "postgresql://db/x"
    assert Config(store={"url": "postgresql://db/x"}, memory={"url": "postgresql://m/y"}
                  ).memory_url == "postgresql://m/y"
    assert Config().memory_url is None
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        Config(memory={"url": "sqlite:///x.db"})


def test_a_database_is_named_without_its_password():
    from orchestrator.plugin_api import MemoryDatabase

    where = MemoryDatabase("postgresql://u:pw1@db:5432/mem?sslmode=require&password=pw2", "p").where
    assert where == "postgresql://u:***@db:5432/mem?sslmode=require&password=*** (project 'p')"
    assert MemoryDatabase("postgresql://u@db/mem", "x").where == "postgresql://u@db/mem (project 'x')"


def test_the_memory_stats_count_a_database_store(tmp_path, pg_url):
    from orchestrator.server.memory_api import memory_stats

    memory = facade(tmp_path / "a", pg_url)
    memory.index(PROJECT, [sample_doc(1), sample_doc(2)])
    other_machine = facade(tmp_path / "b", pg_url)
    stats = memory_stats(other_machine, PROJECT)
    assert stats["docs"] == 2 and stats["store_dir"].endswith("(project 'shared')")
    memory.close()
    other_machine.close()


def _store_schema(url: str, backend: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT id FROM retrieval_stores WHERE backend = %s", (backend,)).fetchone()
    assert row is not None, f"no {backend} store in the database"
    return f"memory_store_{row[0]}"


@pytest.mark.parametrize("backend, table", [("hipporag", "passage_chunks"), ("hindsight", "vectors")])
def test_a_corrupt_vector_row_is_an_error_naming_it(tmp_path, pg_url, backend, table):
    memory = facade(tmp_path / "a", pg_url, backend=backend)
    memory.index(PROJECT, [sample_doc(1), sample_doc(2)])
    memory.close()
    schema = _store_schema(pg_url, backend)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute(f"SELECT min(id) FROM {schema}.{table}").fetchone()[0]
        conn.execute(f"UPDATE {schema}.{table} SET vec = '\\x010203'::bytea WHERE id = %s", (row,))
    other = facade(tmp_path / "b", pg_url, backend=backend)
    with pytest.raises(MemoryStoreError, match=f"{table} holds vectors of mixed or broken sizes") as error:
        other.retrieve(PROJECT, [sample_doc(1)], 5)
    assert f"row id(s) [{row}]" in str(error.value) and "project 'shared'" in str(error.value)
    assert f"[{backend}]" in str(error.value)
    other.close()


def test_a_corrupt_meta_row_is_an_error_naming_it(tmp_path, pg_url):
    memory = facade(tmp_path / "a", pg_url, backend="sliding_window", options={})
    memory.index(PROJECT, [sample_doc(1)])
    memory.close()
    schema = _store_schema(pg_url, "sliding_window")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"UPDATE {schema}.meta SET value = 'gibberish' WHERE key = 'format_version'")
    other = facade(tmp_path / "b", pg_url, backend="sliding_window", options={})
    with pytest.raises(MemoryStoreError, match="is damaged \\(its meta value 'format_version' is 'gibberish'"):
        other.list_docs(PROJECT)
    other.close()
