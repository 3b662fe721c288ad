"""The memory facade: per-project dirs, safe ids, thread and process locks, logged calls."""

from __future__ import annotations

import logging
import multiprocessing
import threading

import pytest
from filelock import FileLock

from orchestrator.errors import ConfigError, MemoryStoreError
from orchestrator.memory.facade import MemoryArgumentError, MemoryFacade, format_memories
from orchestrator.plugins.manager import PluginRegistry


def make_facade(save_dir, **kwargs):
    return MemoryFacade(save_dir, "sliding_window", {"background": False},
                        PluginRegistry(load_entry_points=False), **kwargs)


@pytest.fixture
def facade(tmp_path):
    f = make_facade(tmp_path / "mem")
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
    lock_path = str(facade.lock_path("p"))
    assert lock_path == str(tmp_path / "mem" / ".locks" / "p.lock")
    (tmp_path / "mem" / ".locks").mkdir(parents=True)
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
        facade.index("p", ["a doc"])
    assert str((tmp_path / "mem" / "p").resolve()) in str(err.value)
    assert facade.list_docs("p") == []  # a read of a project without a store creates nothing


def test_bad_backend_or_options_fail_at_construction(tmp_path):
    reg = PluginRegistry(load_entry_points=False)
    with pytest.raises(ConfigError, match="unknown memory backend"):
        MemoryFacade(tmp_path, "nope", {}, reg)
    with pytest.raises(ConfigError, match="bad \\[memory.options\\]"):
        MemoryFacade(tmp_path, "sliding_window", {"nope": 1}, reg)


# --- arguments are checked before any I/O ---------------------------------------------------

@pytest.mark.parametrize("docs, message", [
    ("hello", r"pass a list of docs, e\.g\. \[text\]"),
    (b"hello", r"pass a list of docs"),
    (None, r"list of strings"),
    ([None], r"docs\[0\] is NoneType, not str"),
    (["fine", 7], r"docs\[1\] is int"),
    ([""], r"docs\[0\] is empty"),
    (["  \n"], r"docs\[0\] is empty"),
    (["fine", "half \ud83d pair"], r"docs\[1\] is not valid Unicode \(a lone surrogate"),
])
def test_index_refuses_bad_docs_before_any_io(facade, tmp_path, docs, message):
    with pytest.raises(MemoryArgumentError, match=message):
        facade.index("p", docs)
    assert not (tmp_path / "mem").exists()


@pytest.mark.parametrize("k", [0, -1, True, 2.5, "3"])
def test_retrieve_refuses_a_count_below_one(facade, k):
    with pytest.raises(MemoryArgumentError, match="num_to_retrieve must be a whole number"):
        facade.retrieve("p", ["q"], k)


def test_retrieve_refuses_a_single_query_string_and_defaults_k_only_when_none(tmp_path):
    facade = make_facade(tmp_path / "mem", num_to_retrieve=2)
    with pytest.raises(MemoryArgumentError, match=r"pass a list of queries, e\.g\. \[question\]"):
        facade.retrieve("p", "what did we fix?")
    facade.index("p", ["doc 1", "doc 2", "doc 3"])
    assert facade.retrieve("p", ["doc"])[0]["docs"] == ["doc 3", "doc 2"]  # the default k, newest first
    assert facade.retrieve("p", ["doc"], 1)[0]["docs"] == ["doc 3"]
    facade.close()


def test_argument_errors_are_memory_errors_and_value_errors():
    assert issubclass(MemoryArgumentError, MemoryStoreError)
    assert issubclass(MemoryArgumentError, ValueError)


@pytest.mark.parametrize("call", [
    lambda f: f.index("", ["doc"]),
    lambda f: f.retrieve("", ["q"]),
    lambda f: f.delete("", ["doc"]),
    lambda f: f.list_docs(""),
])
def test_an_empty_project_id_is_refused_never_defaulted(facade, tmp_path, call):
    with pytest.raises(ConfigError, match="project id '' is empty"):
        call(facade)
    assert not (tmp_path / "mem").exists()


@pytest.mark.parametrize("setting, value", [
    ("num_to_retrieve", 0), ("max_doc_chars", 10), ("memories_budget_chars", 0),
    ("max_doc_chars", "8000"), ("max_query_chars", 10),
])
def test_bad_size_settings_fail_at_construction(tmp_path, setting, value):
    with pytest.raises(ConfigError, match=rf"\[memory\] {setting} must be a whole number"):
        make_facade(tmp_path, **{setting: value})


def test_lock_files_live_apart_from_stores(facade, tmp_path):
    facade.index("x", ["doc of x"])
    facade.index("x.lock", ["doc of x.lock"])
    assert facade.list_docs("x") == ["doc of x"]
    assert facade.list_docs("x.lock") == ["doc of x.lock"]
    mem = tmp_path / "mem"
    assert sorted(p.name for p in mem.iterdir()) == [".changes", ".locks", "x", "x.lock"]
    assert (mem / "x").is_dir() and (mem / "x.lock").is_dir()
    assert sorted(p.name for p in (mem / ".locks").iterdir()) == ["x.lock", "x.lock.lock"]
    # each project's change log (memory.changelog) apart too
    assert sorted(p.name for p in (mem / ".changes").iterdir()) == ["x.lock.sqlite", "x.sqlite"]


# --- size caps --------------------------------------------------------------------------------

def test_a_huge_doc_is_cut_on_index_with_a_visible_marker(tmp_path, caplog):
    facade = make_facade(tmp_path / "mem", max_doc_chars=1000)
    huge = "Ticket: huge. " + "x" * 199_986
    with caplog.at_level(logging.WARNING, logger="middle.memory"):
        stored = facade.prepare_doc(huge)
    assert len(stored) <= 1000 and stored.startswith("Ticket: huge. xxx")
    kept = len(stored.split("\n… [truncated")[0])
    assert stored.endswith(f"\n… [truncated: 200000 chars, kept {kept}]")
    assert "cut to" in caplog.text and "max_doc_chars" in caplog.text
    assert facade.prepare_doc(stored) == stored  # the kept text indexes as itself
    facade.index("p", [huge])
    facade.index("p", [stored])  # what the graph keeps for a revert: the same doc, not a second
    assert facade.list_docs("p") == [stored]
    assert facade.delete("p", [huge]) == 1  # the long original means its stored form
    assert facade.list_docs("p") == []
    facade.close()


def test_a_whole_long_doc_from_before_the_cap_can_still_be_deleted(tmp_path):
    uncapped = make_facade(tmp_path / "mem", max_doc_chars=1_000_000)
    long_doc = "Old ticket. " + "y" * 20_000
    uncapped.index("p", [long_doc])
    uncapped.close()
    capped = make_facade(tmp_path / "mem")
    assert capped.list_docs("p") == [long_doc]
    assert capped.delete("p", [long_doc]) == 1
    assert capped.list_docs("p") == []
    capped.close()


def test_docs_within_the_cap_are_stored_unchanged(facade):
    doc = "d" * 20000  # the default max_doc_chars: a 10,000-character chat is kept whole
    assert facade.prepare_doc(doc) is doc
    assert len(facade.prepare_doc(doc + "d")) <= 20000


def _results(*docs):
    return [{"question": "q", "docs": list(docs), "doc_scores": [1.0] * len(docs)}]


def test_format_memories_keeps_whole_docs_then_cuts_one_and_counts_the_rest():
    text = format_memories(_results("s" * 50, "h" * 1000, "t" * 50, "u" * 50), budget_chars=300)
    assert text == ("Memories invoked:\n" + "s" * 50 + "\n" + "h" * 168 + " … [truncated]"
                    + "\n[2 more memories not shown: budget of 300 chars]")
    assert len(text) == 300


def test_format_memories_never_exceeds_the_budget():
    for budget in (100, 150, 333, 2000):
        for size in (1, 30, 59, 60, 61, 200, 5000):
            text = format_memories(_results(*(["x" * size] * 12)), budget_chars=budget)
            assert len(text) <= budget, (budget, size)
            assert text.startswith("Memories invoked:\n")
            if len(text) < 12 * (size + 1):
                assert "[truncated]" in text or "not shown" in text


def test_format_memories_cuts_a_single_huge_doc_to_the_budget():
    text = format_memories(_results("h" * 10_000, "short one"))
    assert len(text) <= 2000  # the default budget, about 500 tokens
    assert "h … [truncated]" in text
    assert text.endswith("[1 more memories not shown: budget of 2000 chars]")


def test_format_memories_drops_a_doc_too_cut_to_say_anything():
    text = format_memories(_results("a" * 100, "b" * 500), budget_chars=170)
    assert text == ("Memories invoked:\n" + "a" * 100
                    + "\n[1 more memories not shown: budget of 170 chars]")


def test_the_facade_formats_with_its_own_budget(tmp_path):
    facade = make_facade(tmp_path / "mem", memories_budget_chars=150)
    text = facade.format_memories(_results(*(["z" * 100] * 3)))
    assert len(text) <= 150 and "budget of 150 chars" in text
