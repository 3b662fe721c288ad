"""Whole documents as chunks: a document is cut into overlapping token windows, each embedded on its
own, and scored by its best chunk."""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Sequence

import numpy as np

from .bm25 import without_paths
from .embedders.base import Embedder, clip_text

# A window is what the default model reads at once: all-MiniLM-L6-v2 takes 256 tokens, [CLS]
# and [SEP] included, so 254 word pieces. A document that fits one window is embedded exactly
# as before chunking (same input string, same vector, same cache key); a longer one gets more
# windows instead of being cut at its 256th token.
WINDOW_TOKENS = 254
# Windows overlap by an eighth: a sentence cut at a window's end is read whole by the next one
# as long as it is under ~32 word pieces (an English sentence averages 20-25 words, ~30 pieces).
OVERLAP_TOKENS = 32
# Embedders that give no word pieces (an endpoint, the hashing fallback) are cut by words,
# at WordPiece's ~1.4 pieces per English word: about the same stretch of text per window.
WINDOW_WORDS, OVERLAP_WORDS = 180, 23
# Chunk vectors live under ids `doc_id * CHUNK_SLOTS + n`. A window advances at least 95 units
# (half a window, to a word's end, less the overlap) of a character or more, so MAX_EMBED_CHARS
# (20,000) gives at most ~210 windows; a pathological doc's windows past 256 are dropped.
CHUNK_SLOTS = 256
SCHEME_VERSION = 1

_WORDS = re.compile(r"\S+")

Spans = list[tuple[int, int]]


# What of a document its vectors read: "text", all of it; "prose", the text without its file
# paths (bm25.without_paths), as the dense half of a query already reads it. A sentence
# embedder reads prose: a list of paths is outside what it was trained on, makes any two
# path-heavy docs look alike, and is a third of a completion doc's or a commit's word pieces
# (what the model's time grows with). BM25 matches the paths exactly.
TEXT, PROSE = "text", "prose"


def scheme(embedder: Embedder, view: str = TEXT) -> str:
    """The chunking a store is built with (recorded in its meta): other windows, other vectors."""
    unit = "pieces" if type(embedder).word_pieces is not Embedder.word_pieces else "words"
    window, overlap = (WINDOW_TOKENS, OVERLAP_TOKENS) if unit == "pieces" else (WINDOW_WORDS,
                                                                               OVERLAP_WORDS)
    recorded: dict[str, Any] = {"version": SCHEME_VERSION, "unit": unit, "window": window,
                                "overlap": overlap}
    if view != TEXT:  # a store built reading the whole text keeps its record as it was
        recorded["view"] = view
    return json.dumps(recorded, sort_keys=True)


def view_of(text: str, view: str) -> str:
    """What of `text` its vectors read (see PROSE)."""
    return without_paths(text) if view == PROSE else text


def chunks(embedder: Embedder, text: str) -> list[str]:
    """The texts a document is embedded as, in order: one when it fits a window."""
    clipped = clip_text(text)
    spans = embedder.word_pieces(clipped)
    if spans is None:
        spans = [m.span() for m in _WORDS.finditer(clipped)]
        window, overlap = WINDOW_WORDS, OVERLAP_WORDS
    else:
        window, overlap = WINDOW_TOKENS, OVERLAP_TOKENS
    if len(spans) <= window:
        return [clipped]
    return [clipped[a:b] for a, b in windows(spans, window, overlap)][:CHUNK_SLOTS]


def windows(spans: Spans, window: int, overlap: int) -> Spans:
    """Character ranges of overlapping windows of at most `window` units, each ending at a word
    end where one is in its second half (so no word is split between two chunk vectors)."""
    out: Spans = []
    start = 0
    while True:
        end = min(start + window, len(spans))
        if end < len(spans):
            cut = end
            # A cut between two units with no space between them splits a word ("embed" "##ding").
            while cut > start + window // 2 and spans[cut][0] <= spans[cut - 1][1]:
                cut -= 1
            if spans[cut][0] > spans[cut - 1][1]:
                end = cut
        out.append((spans[start][0], spans[end - 1][1]))
        if end >= len(spans):
            return out
        start = max(end - overlap, start + 1)
        while start < end and start > 0 and spans[start][0] <= spans[start - 1][1]:
            start += 1  # begin at a word's start too


def embed_chunked(embedder: Embedder, texts: Sequence[str],
                  embed: Callable[[list[str]], np.ndarray], view: str = TEXT) -> list[np.ndarray]:
    """Per document, its chunk vectors (n_chunks, d), from one call of `embed` over all chunks
    (`embed` is the cached document embedding: each chunk is cached on its own) of the
    documents' `view`."""
    per_doc = [chunks(embedder, view_of(t, view)) for t in texts]
    flat = [c for doc in per_doc for c in doc]
    vectors = embed(flat) if flat else np.zeros((0, embedder.dimension or 0), dtype=np.float32)
    out, at = [], 0
    for doc in per_doc:
        out.append(np.ascontiguousarray(vectors[at:at + len(doc)], dtype=np.float32))
        at += len(doc)
    return out


def chunk_ids(doc_ids: Sequence[int] | np.ndarray, counts: Sequence[int] | None = None) -> np.ndarray:
    """The vector ids of documents' chunks: all slots when counts is None (to remove them)."""
    doc_ids = np.asarray(doc_ids, dtype=np.int64)
    if counts is None:
        return (doc_ids[:, None] * CHUNK_SLOTS + np.arange(CHUNK_SLOTS, dtype=np.int64)).ravel()
    return np.concatenate([np.arange(n, dtype=np.int64) + d * CHUNK_SLOTS
                           for d, n in zip(doc_ids.tolist(), counts)] or [np.zeros(0, np.int64)])


def best_docs(search: Callable[[np.ndarray, int], tuple[list[int], list[float]]],
              query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k documents whose best chunk is nearest the query, with that chunk's score.
    `search(query, n)` gives the n nearest chunks as (doc ids, scores), best first; more are
    asked for while fewer than k documents were found and more chunks are left."""
    if k <= 0:
        return []
    n = k * 4  # most documents are one chunk; a long one seldom has more than 4 near the top
    while True:
        ids, scores = search(query, n)
        best: dict[int, float] = {}
        for doc, score in zip(ids, scores):
            if doc not in best:
                best[doc] = float(score)
        if len(best) >= k or len(ids) < n:
            return list(best.items())[:k]
        n *= 4


def doc_vector(chunk_vectors: np.ndarray) -> np.ndarray:
    """One unit vector for a whole document (MMR's redundancy, near-duplicate checks): the
    normalised mean of its chunks, which is the chunk itself for a one-chunk document."""
    mean = np.asarray(chunk_vectors, dtype=np.float32).reshape(-1, chunk_vectors.shape[-1]).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm else mean


def claim_chunking(store: Any, embedder: Embedder, backend: str,
                   docs_table: str = "docs", view: str = TEXT) -> str | None:
    """Record the chunking of a store that holds no doc yet; for one whose docs were embedded
    another way (or before chunking), the error to give instead of searching its vectors: a
    store's vectors answer only for the scheme they were made with."""
    wanted = scheme(embedder, view)
    with store.write() as conn:
        held = store.meta(conn, "chunking")
        if held != wanted and not store.holds_rows(conn, docs_table):
            store.set_meta(conn, "chunking", wanted)
            held = wanted
    if held == wanted:
        if hasattr(store, "raise_version"):  # an older file without docs: now a chunked one
            store.raise_version(list(range(1, store.format_version)))
        return None
    if held is None:
        how, fix = ("before documents were embedded whole (each was read to its first 256 tokens)",
                    "re-embed its docs whole")
    elif _view(held) != view:
        how, fix = (f"with vectors that read its docs' {_VIEWS.get(_view(held), _view(held))}, where "
                    f"{backend} now reads their {_VIEWS.get(view, view)}"), "re-embed its docs"
    else:
        how, fix = f"with another chunking ({held})", "re-embed its docs"
    return (f"the {store.kind} {store.path} was built {how}: run `middle memory reindex --from "
            f"{backend}` to {fix} (the docs and their times are kept)")


_VIEWS = {TEXT: "whole text, file paths too", PROSE: "prose (no file paths)"}


def _view(recorded: str) -> str:
    """The view a recorded scheme names (TEXT when it names none, or is not JSON)."""
    try:
        data = json.loads(recorded)
    except ValueError:
        return TEXT
    return str(data.get("view", TEXT)) if isinstance(data, dict) else TEXT
