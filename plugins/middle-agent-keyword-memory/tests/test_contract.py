"""Runs middle-agent's backend contract suite over the keyword backend, plus its own checks."""

from __future__ import annotations

import json
from importlib import metadata

import pluggy
import pytest

from middle_agent_keyword_memory import KeywordBackend, KeywordOptions
from orchestrator import hookspecs
from orchestrator.errors import MemoryStoreError
from orchestrator.testing import MemoryBackendContract


class TestKeywordContract(MemoryBackendContract):
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
