"""InMemoryBackend: an honest in-process fake memory backend that records every call it gets."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any, ClassVar

from orchestrator.plugins.backend_options import BackendOptions
from orchestrator.plugins.memory_backend import (
    ConversationContext,
    MemoryBackend,
    RetrieveResult,
    TextLLM,
    check_texts,
)

_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    """Lower-cased word tokens (Unicode-aware, so CJK runs and accented words count)."""
    return {w.casefold() for w in _WORD.findall(text)}


class InMemoryOptions(BackendOptions):
    """The in-memory fake takes no options."""


class InMemoryBackend(MemoryBackend):
    """Keeps docs in a process-wide dict keyed by store_dir and ranks them by word overlap.

    Not registered by default; graph tests construct it (or register it themselves) and assert
    on `.calls`, a list of `(method, args)` tuples in call order. The store outlives an instance
    so that opening the same store_dir again in one process behaves like a reopen.
    """

    name = "in_memory"
    description = "In-process fake for tests: word-overlap ranking, records every call."
    Options = InMemoryOptions

    _stores: ClassVar[dict[str, list[str]]] = {}
    _stores_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        store_dir: Path,
        options: BackendOptions | None = None,
        llm: TextLLM | None = None,
    ):
        super().__init__(store_dir, options or InMemoryOptions(), llm)
        self._key = str(Path(store_dir).resolve())
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        with self._stores_lock:
            self._docs = self._stores.setdefault(self._key, [])

    @classmethod
    def reset(cls) -> None:
        """Forget every store (for test isolation when store dirs are reused)."""
        with cls._stores_lock:
            cls._stores.clear()

    def _record(self, method: str, *args: Any) -> None:
        with self._stores_lock:
            self.calls.append((method, args))

    def index(self, docs: list[str]) -> None:
        check_texts(docs)  # before any change: a bad doc leaves the store as it was
        self._record("index", list(docs))
        with self._stores_lock:
            for doc in docs:
                if doc not in self._docs:
                    self._docs.append(doc)

    def retrieve(self, queries: list[str], num_to_retrieve: int) -> list[RetrieveResult]:
        """Rank by Jaccard overlap of word sets (exact match 1.0); no overlap, not returned."""
        self._record("retrieve", list(queries), num_to_retrieve)
        with self._stores_lock:
            docs = list(self._docs)
        results: list[RetrieveResult] = []
        for query in queries:
            qwords = words(query)
            scored = []
            for position, doc in enumerate(docs):
                score = 1.0 if doc == query else _jaccard(qwords, words(doc))
                if score > 0:
                    # Newer docs win ties, as a developer would trust the latest note first.
                    scored.append((-score, -position, doc))
            top = sorted(scored)[: max(0, num_to_retrieve)]
            results.append(
                {
                    "question": query,
                    "docs": [d for _, _, d in top],
                    "doc_scores": [-s for s, _, _ in top],
                }
            )
        return results

    def delete(self, docs: list[str]) -> int:
        check_texts(docs)
        self._record("delete", list(docs))
        removed = 0
        with self._stores_lock:
            for doc in dict.fromkeys(docs):
                if doc in self._docs:
                    self._docs.remove(doc)
                    removed += 1
        return removed

    def list_docs(self) -> list[str]:
        self._record("list_docs")
        with self._stores_lock:
            return list(self._docs)

    def observe_round(self, conversation_id: str, prompt: str, response: str) -> None:
        self._record("observe_round", conversation_id, prompt, response)

    def conversation_context(self, conversation_id: str) -> ConversationContext | None:
        self._record("conversation_context", conversation_id)
        return None

    def flush(self, timeout: float | None = None) -> None:
        self._record("flush", timeout)

    def close(self) -> None:
        self._record("close")


def _jaccard(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)
