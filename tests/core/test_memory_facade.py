"""The memory facade: per-project dirs, safe ids, thread and process locks, logged calls."""

from __future__ import annotations

import logging
import multiprocessing
import threading

import pytest
from filelock import FileLock

from orchestrator.errors import ConfigError, MemoryStoreError
from orchestrator.memory import MemoryFacade, format_memories
from orchestrator.plugins import PluginRegistry


@pytest.fixture
def facade(tmp_path):
    f = MemoryFacade(tmp_path / "mem", "sliding_window", {"background": False},
                     PluginRegistry(load_entry_points=False))
    yield f
    f.close()


def test_format_memories_flattens_all_results():
    results = [{"question": "a", "docs": ["d1", "d2"], "doc_scores": [1.0, 0.5]},
               {"question": "b", "docs": ["d3"], "doc_scores": [0.1]}]
    assert format_memories(results) == "Memories invoked:\nd1\nd2\nd3"
    assert format_memories([{"question": "a", "docs": [], "doc_scores": []}]) == ""
    assert format_memories([]) == ""


@pytest.mark.parametrize("bad", ["../x", "a/b", "..", "", "a\\b", ".hidden", "x" * 101])
def test_unsafe_project_ids_are_refused_before_any_io(facade, tmp_path, bad):
    with pytest.raises(ConfigError, match="not safe|project id"):
        facade.index(bad, ["doc"])
    assert not (tmp_path / "x").exists() and not (tmp_path / "mem").exists()


def test_one_store_per_project(facade, tmp_path):
    facade.index("alpha", ["alpha doc"])
    facade.index("beta", ["beta doc"])
    assert facade.store_dir("alpha") == (tmp_path / "mem" / "alpha").resolve()
    assert facade.list_docs("alpha") == ["alpha doc"] and facade.list_docs("beta") == ["beta doc"]
    assert (tmp_path / "mem" / "alpha").is_dir()


def test_calls_are_logged_with_counts_and_absolute_path(facade, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="middle.memory"):
        facade.index("p", ["one", "two"])
        facade.retrieve("p", ["one"], 3)
    text = caplog.text
    assert "memory index project=p backend=sliding_window docs=2" in text
    assert "memory retrieve project=p" in text and "queries=1" in text
    assert str((tmp_path / "mem" / "p").resolve()) in text


def test_threads_share_a_project_safely(facade):
    def work(i):
        for j in range(10):
            facade.index("p", [f"doc {i}-{j}"])
            facade.retrieve("p", [f"doc {i}-{j}"], 5)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(facade.list_docs("p")) == 40


def _hold_lock(path, ready, release):
    with FileLock(path):
        ready.set()
        release.wait(30)


def test_file_lock_guards_the_project_across_processes(tmp_path):
    facade = MemoryFacade(tmp_path / "mem", "sliding_window", {}, PluginRegistry(load_entry_points=False),
                          lock_timeout_s=0.3)
    lock_path = str(facade.store_dir("p")) + ".lock"
    (tmp_path / "mem").mkdir()
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(lock_path, ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(MemoryStoreError, match="another process holds the lock"):
            facade.index("p", ["blocked"])
    finally:
        release.set()
        holder.join(30)
    facade.index("p", ["now free"])
    assert facade.list_docs("p") == ["now free"]
    facade.close()


def test_backend_errors_become_memory_store_errors_naming_the_store(tmp_path):
    (tmp_path / "mem").mkdir()
    (tmp_path / "mem" / "p").write_text("a file where the store dir should be")
    facade = MemoryFacade(tmp_path / "mem", "sliding_window", {}, PluginRegistry(load_entry_points=False))
    with pytest.raises(MemoryStoreError) as err:
        facade.retrieve("p", ["q"])
    assert str((tmp_path / "mem" / "p").resolve()) in str(err.value)


def test_bad_backend_or_options_fail_at_construction(tmp_path):
    reg = PluginRegistry(load_entry_points=False)
    with pytest.raises(ConfigError, match="unknown memory backend"):
        MemoryFacade(tmp_path, "nope", {}, reg)
    with pytest.raises(ConfigError, match="bad \\[memory.options\\]"):
        MemoryFacade(tmp_path, "sliding_window", {"nope": 1}, reg)
