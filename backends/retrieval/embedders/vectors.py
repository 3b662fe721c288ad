"""Vector helpers under every embedder module: the text length read, row-wise normalisation."""

from __future__ import annotations

import numpy as np

# Long docs are cut before tokenising: every model here reads at most a few hundred tokens, and
# tokenising a megabyte only to drop all but its start costs seconds.
MAX_EMBED_CHARS = 20_000


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation to float32; an all-zero row stays zero (similarity 0 to all)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(vectors / norms, dtype=np.float32)
