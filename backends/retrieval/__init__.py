"""Retrieval parts shared by backends, imported as `from backends import retrieval`."""

from . import (  # noqa: F401 - `retrieval.supersession`
    bm25,
    burst,
    chunking,
    expansion,
    fusion,
    issues,
    late,
    pipeline,
    supersession,
    thread,
    thread_docs,
)
from .backend import RetrievalBackend
from .cache import EmbeddingCache, cache_dir, embed_documents, shared_cache
from .embedders import (
    INSTALL_HINT,
    Embedder,
    FastEmbedEmbedder,
    HashingEmbedder,
    HttpEmbedder,
    MiniLMEmbedder,
    SentenceTransformerEmbedder,
    default_embedder_name,
    make_embedder,
)
from .mirror import ChunkMatrixMirror, ChunkMirror, IndexMirror, MatrixMirror
from .options import (
    Bm25Options,
    DenseOptions,
    EmbedderOptions,
    HybridOptions,
    PipelineOptions,
    RecencyOptions,
)
from .store import FORMAT_VERSION, MemoryRecord, RetrievalStore
from .vector import VectorIndex

__all__ = [
    "bm25",
    "burst",
    "chunking",
    "fusion",
    "pipeline",
    "thread",
    "RetrievalBackend",
    "RetrievalStore",
    "IndexMirror",
    "MatrixMirror",
    "ChunkMirror",
    "ChunkMatrixMirror",
    "MemoryRecord",
    "FORMAT_VERSION",
    "VectorIndex",
    "EmbeddingCache",
    "cache_dir",
    "embed_documents",
    "shared_cache",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "HttpEmbedder",
    "SentenceTransformerEmbedder",
    "FastEmbedEmbedder",
    "make_embedder",
    "default_embedder_name",
    "INSTALL_HINT",
    "Bm25Options",
    "DenseOptions",
    "EmbedderOptions",
    "HybridOptions",
    "PipelineOptions",
    "RecencyOptions",
]
