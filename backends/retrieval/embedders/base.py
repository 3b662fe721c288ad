"""The Embedder interface: documents and queries to L2-normalised float32 vectors, with a model id."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

# The vector helpers live below both this interface and the token states (no import circle).
from .vectors import MAX_EMBED_CHARS, normalise  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from .states import TokenStates

INSTALL_HINT = "pip install 'middle-agent[embeddings]'"

# Models trained with task prefixes embed worse without them (nomic's, for one). Matched by
# substring of the lower-cased model name; explicit query_prefix/document_prefix options win.
KNOWN_PREFIXES: tuple[tuple[str, str, str], ...] = (
    ("nomic-embed-text", "search_query: ", "search_document: "),
    ("e5-", "query: ", "passage: "),
    ("bge-", "Represent this sentence for searching relevant passages: ", ""),
    ("mxbai-embed-large", "Represent this sentence for searching relevant passages: ", ""),
    ("snowflake-arctic-embed", "Represent this sentence for searching relevant passages: ", ""),
)

def default_prefixes(model: str) -> tuple[str, str]:
    """(query_prefix, document_prefix) known for a model name, or empty strings."""
    name = model.lower()
    for needle, query, document in KNOWN_PREFIXES:
        if needle in name:
            return query, document
    return "", ""


def clip_text(text: str) -> str:
    """Collapse whitespace runs (no tokenizer here keeps them) and cut to MAX_EMBED_CHARS."""
    return " ".join(text[: MAX_EMBED_CHARS * 4].split())[:MAX_EMBED_CHARS]


class Embedder(ABC):
    """Turns text into unit vectors; `model_id` names the vector space and is stored with an index.

    Subclasses implement `_embed(texts)` on already-prefixed texts; prefixes, clipping and
    normalisation happen here so every embedder treats input the same way.
    """

    #: Stored with every index; a store built under another id is refused.
    model_id: str = ""
    #: Vector size; None until known (remote models report it on their first answer).
    dimension: int | None = None
    #: Whether document vectors may be cached by (model_id, text hash). False when embedding
    #: is cheaper than a cache lookup (the hashing fallback).
    cacheable: bool = True

    def __init__(self, query_prefix: str = "", document_prefix: str = ""):
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix

    @abstractmethod
    def _embed(self, texts: list[str]) -> np.ndarray:
        """Vectors (n, d) for already-prefixed, clipped texts; need not be normalised."""

    def spec(self) -> dict[str, Any]:
        """What is needed to build this embedder again (recorded in the store, never secrets)."""
        return {"embedder": self.name_for_spec(), "query_prefix": self.query_prefix,
                "document_prefix": self.document_prefix}

    def name_for_spec(self) -> str:
        return self.model_id

    def document_inputs(self, texts: Sequence[str]) -> list[str]:
        """The exact strings the model sees for these documents (the cache keys hash these)."""
        return [self.document_prefix + clip_text(t) for t in texts]

    def embed_inputs(self, inputs: list[str]) -> np.ndarray:
        """Embed prepared inputs (from document_inputs) to unit vectors."""
        if not inputs:
            return np.zeros((0, self.dimension or 0), dtype=np.float32)
        vectors = normalise(self._embed(inputs))
        if vectors.shape[0] != len(inputs):
            raise ValueError(f"{self.model_id} returned {vectors.shape[0]} vectors for {len(inputs)} texts")
        self.dimension = int(vectors.shape[1])
        return vectors

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors (n, d) for documents, with the document prefix."""
        return self.embed_inputs(self.document_inputs(texts))

    def embed_query(self, text: str) -> np.ndarray:
        """One unit vector (d,) for a search query, with the query prefix."""
        return self.embed_inputs([self.query_prefix + clip_text(text)])[0]

    def word_pieces(self, text: str) -> list[tuple[int, int]] | None:
        """Character spans of the model's tokens in text (no special tokens), for cutting a long
        document in windows the model reads whole; None when this embedder has no tokenizer
        here (then windows are counted in words)."""
        return None

    def token_states(self, text: str, reach: int = 0) -> TokenStates | None:
        """A document's vector and contextual token states (see `states`), read at least to
        character `reach` of text; None when the model gives no token states (an endpoint,
        the hashing fallback), and callers embed the parts alone."""
        return None

    def token_states_many(self, wanted: Sequence[tuple[str, int]]) -> Sequence[TokenStates | None]:
        """`token_states(text, reach)` for each (text, reach), in order; a model that can runs
        them together (a retain of many docs: an import, a reindex)."""
        return [self.token_states(text, reach) for text, reach in wanted]


def prefix_tag(query_prefix: str, document_prefix: str) -> str:
    """A short suffix for a model id when prefixes are used: other prefixes, other vectors."""
    if not query_prefix and not document_prefix:
        return ""
    digest = hashlib.sha256(f"{query_prefix}\x00{document_prefix}".encode()).hexdigest()[:8]
    return f"#prefix-{digest}"
