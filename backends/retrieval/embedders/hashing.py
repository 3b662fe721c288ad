"""The no-model fallback: hashed word and character-trigram features (NumPy only, deterministic)."""

from __future__ import annotations

import re
import zlib

import numpy as np

from .base import Embedder

_WORD = re.compile(r"\w+")


class HashingEmbedder(Embedder):
    """Feature hashing of words and their character trigrams into a fixed-size signed vector.

    Not a semantic model: it matches shared words and word pieces (so "configure" is near
    "configuration"), which keeps memory useful when no embedding model is installed.
    """

    cacheable = False  # hashing a text is cheaper than looking its vector up

    def __init__(self, dimension: int = 384, query_prefix: str = "", document_prefix: str = ""):
        super().__init__(query_prefix, document_prefix)
        self.dimension = dimension
        self.model_id = f"hashing-v1-d{dimension}"

    def name_for_spec(self) -> str:
        return "hashing"

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.vstack([self._one(text) for text in texts])

    def _one(self, text: str) -> np.ndarray:
        dim = self.dimension
        assert dim is not None
        keys: list[int] = []
        weights: list[float] = []
        for word in _WORD.findall(text.lower()):
            keys.append(zlib.crc32(b"w:" + word.encode("utf-8", "surrogatepass")))
            weights.append(1.0)
            padded = f"<{word}>"
            for i in range(len(padded) - 2):
                keys.append(zlib.crc32(b"c:" + padded[i:i + 3].encode("utf-8", "surrogatepass")))
                weights.append(0.4)
        vector = np.zeros(dim, dtype=np.float32)
        if keys:
            hashed = np.asarray(keys, dtype=np.uint64)
            # The top bit picks the sign, so unrelated features cancel out on average.
            signs = np.where((hashed >> np.uint64(31)) & np.uint64(1), 1.0, -1.0)
            np.add.at(vector, (hashed % np.uint64(dim)).astype(np.int64),
                      signs * np.asarray(weights))
        return vector
