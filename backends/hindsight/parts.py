"""What the hindsight helpers (retain, recall, reflect, observations, lifecycle) use of the
backend: its bank, options, clock, models and a few calls. They take this, not the backend
class, so no helper imports backend.py (which imports them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from backends.common import QueryVectors
    from orchestrator.plugin_api import TextLLM, retrieval

    from .bank import BankParts
    from .options import HindsightOptions


class HindsightParts(Protocol):
    """The parts of a HindsightBackend the helper modules read or call."""

    bank: BankParts
    options: HindsightOptions
    llm: TextLLM | None
    embedder: retrieval.Embedder
    cache: retrieval.EmbeddingCache | None
    fact_vectors: str
    clock: Callable[[], float]
    query_vector: QueryVectors

    def has_facts(self) -> bool: ...

    # Hits and retain items as Any: naming recall's and retain's types here would import the
    # modules that import this one.
    def recall_facts(self, query: str, k: int, **kwargs: Any) -> list[Any]: ...

    def _retain(self, items: list[Any]) -> list[int]: ...
