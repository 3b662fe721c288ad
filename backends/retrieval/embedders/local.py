"""Embedders for users with a model cache or internet: sentence-transformers and fastembed."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from orchestrator.plugin_api import ConfigError

from .base import Embedder, prefix_tag

_models: dict[tuple[str, str], Any] = {}  # one loaded model per (library, name) per process
_models_lock = threading.Lock()


def _cached(library: str, name: str, load) -> Any:
    with _models_lock:
        if (library, name) not in _models:
            _models[(library, name)] = load()
        return _models[(library, name)]


def _missing(package: str, spec: str) -> ConfigError:
    return ConfigError(
        f"embedder = \"{spec}\" needs the {package!r} package: run pip install {package} "
        "(it downloads the model on first use, or reads it from your model cache)"
    )


class SentenceTransformerEmbedder(Embedder):
    """Any sentence-transformers model by name or local path; prefixes as for other models."""

    def __init__(self, model: str, query_prefix: str = "", document_prefix: str = ""):
        if not model:
            raise ConfigError('embedder = "sentence-transformers:" names no model')
        super().__init__(query_prefix, document_prefix)
        self.model = model
        self.model_id = f"sentence-transformers:{model}{prefix_tag(query_prefix, document_prefix)}"

    def name_for_spec(self) -> str:
        return f"sentence-transformers:{self.model}"

    def _load(self) -> Any:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise _missing("sentence-transformers", self.name_for_spec()) from None
        return _cached("st", self.model, lambda: SentenceTransformer(self.model, device="cpu"))

    def _embed(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        return np.asarray(model.encode(texts, batch_size=16, normalize_embeddings=True,
                                       show_progress_bar=False), dtype=np.float32)


class FastEmbedEmbedder(Embedder):
    """A fastembed model; fastembed adds its own query/passage prefixes for models that need them."""

    def __init__(self, model: str, query_prefix: str = "", document_prefix: str = ""):
        if not model:
            raise ConfigError('embedder = "fastembed:" names no model')
        super().__init__(query_prefix, document_prefix)
        self.model = model
        self.model_id = f"fastembed:{model}{prefix_tag(query_prefix, document_prefix)}"

    def name_for_spec(self) -> str:
        return f"fastembed:{self.model}"

    def _load(self) -> Any:
        try:
            from fastembed import TextEmbedding
        except ImportError:
            raise _missing("fastembed", self.name_for_spec()) from None
        return _cached("fastembed", self.model, lambda: TextEmbedding(self.model))

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.vstack(list(self._load().passage_embed(texts))).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        from .base import clip_text, normalise

        vector = next(iter(self._load().query_embed([self.query_prefix + clip_text(text)])))
        return normalise(np.asarray(vector))[0]
