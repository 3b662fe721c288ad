"""Optional backend methods are declared on MemoryBackend with defaults, never probed for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.memory.facade import backend_has_doc, write_records
from orchestrator.memory.stores import _records
from orchestrator.plugin_api import MemoryBackend, MemoryRecord, RetrieveResult

ROOT = Path(__file__).resolve().parents[2]


class Minimal(MemoryBackend):
    """A plugin that writes only the required methods and list_docs."""

    name = "minimal"

    def __init__(self, store_dir: Path):
        super().__init__(store_dir, None)  # type: ignore[arg-type]
        self.docs: list[str] = []

    def index(self, docs: list[str]) -> None:
        self.docs += [d for d in docs if d not in self.docs]

    def retrieve(self, queries: list[str], num_to_retrieve: int) -> list[RetrieveResult]:
        return [{"question": q, "docs": self.docs[:num_to_retrieve], "doc_scores": []} for q in queries]

    def delete(self, docs: list[str]) -> int:
        before = len(self.docs)
        self.docs = [d for d in self.docs if d not in docs]
        return before - len(self.docs)

    def list_docs(self) -> list[str]:
        return list(self.docs)


class Unlisted(Minimal):
    def list_docs(self) -> list[str]:
        return MemoryBackend.list_docs(self)  # the base refuses: cannot list


class Timed(Minimal):
    """A plugin that keeps event times."""

    keeps_times = True

    def __init__(self, store_dir: Path):
        super().__init__(store_dir)
        self.times: dict[str, float | None] = {}

    def index_records(self, records):
        self.index([r.text for r in records])
        self.times.update({r.text: r.timestamp for r in records})

    def list_records(self):
        return [(d, self.times.get(d)) for d in self.docs]


def test_a_backend_gets_the_optional_methods_with_their_defaults(tmp_path):
    backend = Minimal(tmp_path)
    assert not backend.keeps_times and not backend.embeds_docs()
    backend.warm_embeddings(["nothing stored"])
    assert backend.docs == []
    backend.index_records([MemoryRecord("a", timestamp=1.0), MemoryRecord("b")])
    assert backend.docs == ["a", "b"]
    assert backend.has_doc("a") and not backend.has_doc("c")
    assert backend.list_records() == [("a", None), ("b", None)]
    assert not Unlisted(tmp_path).has_doc("a")  # cannot list: not found, no error
    with pytest.raises(NotImplementedError):
        Unlisted(tmp_path).list_records()


def test_the_facade_calls_the_declared_methods(tmp_path):
    plain, timed = Minimal(tmp_path), Timed(tmp_path)
    write_records(plain, [("a", 5.0), ("b", None)])
    write_records(timed, [("a", 5.0), ("b", None)])
    assert plain.docs == timed.docs == ["a", "b"]
    assert timed.times == {"a": 5.0, "b": None}
    assert _records(plain) == [("a", None), ("b", None)] and _records(timed) == [("a", 5.0), ("b", None)]
    assert backend_has_doc(timed, "b") and not backend_has_doc(plain, "z")


def test_the_built_in_backends_declare_what_they_can(tmp_path):
    from orchestrator.plugins.manager import PluginRegistry

    registry = PluginRegistry(load_entry_points=False)
    # sliding_window too: an edit keeps a doc's place in its window
    for name in ("hybrid", "dense", "bm25", "hindsight", "hipporag", "sliding_window"):
        assert registry.backend_class(name).keeps_times, name
    assert not registry.backend_class("none").keeps_times
    bm25 = registry.backend_class("bm25")(tmp_path / "bm25", {})
    hybrid = registry.backend_class("hybrid")(tmp_path / "hybrid", {"embedder": "hashing"})
    try:
        assert not bm25.embeds_docs() and hybrid.embeds_docs()
    finally:
        bm25.close()
        hybrid.close()


def test_memory_record_is_one_class_that_the_core_owns():
    from backends import retrieval
    from orchestrator.plugins import memory_backend as backend

    assert retrieval.MemoryRecord is MemoryRecord is backend.MemoryRecord


def test_no_capability_is_found_by_probing():
    probe = re.compile(r"\b(getattr|hasattr)\(\s*backend\b")
    for rel in ("orchestrator/memory/facade.py", "orchestrator/memory/stores.py", "orchestrator/bench/runner.py"):
        text = (ROOT / rel).read_text(encoding="utf-8")
        assert not probe.search(text), f"{rel} probes a backend for a method: declare it on MemoryBackend"


def test_a_ticket_sources_optional_capability_is_declared_not_probed(tmp_path):
    """sync asks a source for closed/reopened tickets only when it declares ClosingSource."""
    from orchestrator.plugin_api import ClosingSource
    from tickets.github.source import GitHubIssuesSource
    from tickets.source import MarkdownFolderSource

    text = (ROOT / "orchestrator/running/sync.py").read_text(encoding="utf-8")
    assert not re.search(r"\b(getattr|hasattr)\(\s*opened\s*,\s*\"(closed|reopened)\"", text)
    assert issubclass(GitHubIssuesSource, ClosingSource) and issubclass(MarkdownFolderSource, ClosingSource)

    class LoadsOnly:  # a source that does not declare it is never asked
        where = "x"

        def load(self) -> None: ...

    assert not issubclass(LoadsOnly, ClosingSource)


    class Declares(ClosingSource):  # a source that declares it and overrides nothing closes nothing
        pass

    assert Declares().closed([]) == {} and Declares().reopened([]) == []
