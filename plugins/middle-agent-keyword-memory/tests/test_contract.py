"""Runs middle-agent's backend contract suite over the keyword backend, plus its own checks."""

from __future__ import annotations

import json
import os
import time
from importlib import metadata

import pluggy
import pytest

from middle_agent_keyword_memory import KeywordBackend, KeywordOptions
from orchestrator.plugin_api import MemoryStoreError
from orchestrator.plugins import hookspecs
from orchestrator.testing import MemoryBackendContract


class TestKeywordContract(MemoryBackendContract):
    process_factory = "middle_agent_keyword_memory:KeywordBackend"  # opened in real processes
    leftover_temp_file = ".keyword-killed.tmp"  # shaped like the temp files it writes

    @pytest.fixture
    def backend_factory(self):
        return lambda store_dir: KeywordBackend(store_dir, KeywordOptions())


def test_min_overlap_filters_weak_matches(tmp_path):
    backend = KeywordBackend(tmp_path, KeywordOptions(min_overlap=2))
    backend.index(["fixed the login form validation", "login page is slow"])
    (result,) = backend.retrieve(["login form broken"], 5)
    assert result["docs"] == ["fixed the login form validation"]


def test_file_is_plain_json_and_corruption_is_reported(tmp_path):
    backend = KeywordBackend(tmp_path)
    backend.index(["naïve café 🎉"])
    data = json.loads((tmp_path / "keyword_memory.json").read_text(encoding="utf-8"))
    assert data == {"version": 1, "docs": ["naïve café 🎉"]}
    assert not list(tmp_path.glob(".keyword-*")), "no temp file left behind"
    (tmp_path / "keyword_memory.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(MemoryStoreError, match="keyword_memory.json"):
        KeywordBackend(tmp_path)


def test_a_file_with_non_text_docs_is_reported_not_loaded(tmp_path):
    (tmp_path / "keyword_memory.json").write_text('{"version": 1, "docs": ["ok", null]}')
    with pytest.raises(MemoryStoreError, match="keyword_memory.json.*list of strings"):
        KeywordBackend(tmp_path)


def test_leftover_temp_files_are_removed_on_open(tmp_path):
    KeywordBackend(tmp_path).index(["kept doc"])
    (tmp_path / ".keyword-abc123.tmp").write_text('{"version": 1, "docs": ["half')
    assert KeywordBackend(tmp_path).list_docs() == ["kept doc"]
    assert not list(tmp_path.glob(".keyword-*.tmp"))


def test_a_same_size_rewrite_by_another_instance_is_seen(tmp_path):
    # The file keeps its size; what changed shows in its stat (and a file this fresh is read
    # again anyway, as a rewrite within one mtime tick could leave even the stat unchanged).
    first, second = KeywordBackend(tmp_path), KeywordBackend(tmp_path)
    first.index(["aaaa"])
    assert first.list_docs() == ["aaaa"]
    assert second.delete(["aaaa"]) == 1
    second.index(["bbbb"])
    assert first.list_docs() == ["bbbb"]


class CountingKeywordBackend(KeywordBackend):
    loads = 0

    def _load(self):
        self.loads += 1
        return super()._load()


def test_an_unchanged_settled_file_is_not_read_again(tmp_path):
    KeywordBackend(tmp_path).index(["settled doc"])
    old = time.time() - 60
    os.utime(tmp_path / "keyword_memory.json", (old, old))
    backend = CountingKeywordBackend(tmp_path)
    for _ in range(3):
        assert backend.retrieve(["settled doc"], 1)[0]["docs"] == ["settled doc"]
    assert backend.loads == 1
    KeywordBackend(tmp_path).index(["new doc"])  # another instance writes: read again
    assert backend.list_docs() == ["settled doc", "new doc"] and backend.loads == 2


def test_entry_point_registers_the_backend():
    try:
        eps = metadata.entry_points(group="middle_agent")
    except metadata.PackageNotFoundError:  # pragma: no cover
        eps = []
    if not any(ep.name == "keyword_memory" for ep in eps):
        pytest.skip("plugin not installed: pip install -e plugins/middle-agent-keyword-memory")
    pm = pluggy.PluginManager("middle_agent")
    pm.add_hookspecs(hookspecs)
    pm.load_setuptools_entrypoints("middle_agent", name="keyword_memory")
    found: list[type] = []
    pm.hook.register_memory_backends(register=found.append)
    assert found == [KeywordBackend]
