"""The built-in backend plugin modules register their classes through the pluggy hook."""

from __future__ import annotations

import importlib

import pluggy
import pytest

from backends.none import NoneBackend
from backends.sliding_window import SlidingWindowBackend
from orchestrator.plugins import hookspecs
from orchestrator.testing import InMemoryBackend


def registered_by(module_name: str) -> list[type]:
    pm = pluggy.PluginManager("middle_agent")
    pm.add_hookspecs(hookspecs)
    pm.register(importlib.import_module(module_name))
    found: list[type] = []
    pm.hook.register_memory_backends(register=found.append)
    return found


@pytest.mark.parametrize(
    "module_name, cls",
    [
        ("backends.sliding_window.plugin", SlidingWindowBackend),
        ("backends.none.plugin", NoneBackend),
    ],
)
def test_plugin_module_registers_its_backend(module_name, cls):
    assert registered_by(module_name) == [cls]


def test_none_backend_keeps_nothing_and_touches_no_disk(tmp_path):
    backend = NoneBackend(tmp_path / "never-created")
    backend.index(["a doc"])
    assert backend.retrieve(["a doc", "b"], 5) == [
        {"question": "a doc", "docs": [], "doc_scores": []},
        {"question": "b", "docs": [], "doc_scores": []},
    ]
    assert backend.delete(["a doc"]) == 0 and backend.list_docs() == []
    assert not (tmp_path / "never-created").exists()


def test_in_memory_backend_records_calls_and_ranks_by_overlap(tmp_path):
    backend = InMemoryBackend(tmp_path)
    backend.index(["fix the login form", "speed up the csv export", "login token cache"])
    (result,) = backend.retrieve(["login form bug"], 5)
    assert result["docs"] == ["fix the login form", "login token cache"]
    assert result["doc_scores"][0] > result["doc_scores"][1] > 0
    backend.observe_round("t1", "prompt", "response")
    assert backend.calls == [
        ("index", (["fix the login form", "speed up the csv export", "login token cache"],)),
        ("retrieve", (["login form bug"], 5)),
        ("observe_round", ("t1", "prompt", "response")),
    ]
    assert InMemoryBackend(tmp_path).list_docs()[0] == "fix the login form"
    InMemoryBackend.reset()
    assert InMemoryBackend(tmp_path).list_docs() == []
