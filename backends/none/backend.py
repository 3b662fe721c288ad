"""A memory backend that stores nothing; the facade treats `backend = "none"` as memory off."""

from __future__ import annotations

from orchestrator.plugin_api import BackendOptions, MemoryBackend, RetrieveResult, check_texts


class NoneOptions(BackendOptions):
    """The none backend takes no options (any key in [memory.options] is an error)."""


class NoneBackend(MemoryBackend):
    """Forgets everything it is given, while still answering in the contract's shapes."""

    name = "none"
    description = "No memory: index is ignored and retrieve returns no docs."
    Options = NoneOptions

    def __init__(self, store_dir, options: BackendOptions | None = None, llm=None):
        # It never touches store_dir: "memory off" must not create directories.
        super().__init__(store_dir, options or NoneOptions(), llm)

    def index(self, docs: list[str]) -> None:
        check_texts(docs)  # memory off still refuses what no other backend would take

    def retrieve(self, queries: list[str], num_to_retrieve: int) -> list[RetrieveResult]:
        return [{"question": q, "docs": [], "doc_scores": []} for q in queries]

    def delete(self, docs: list[str]) -> int:
        check_texts(docs)
        return 0

    def list_docs(self) -> list[str]:
        return []
