"""Token states of one document: vectors for parts of it from the document's own model pass.

"Late chunking" (Günther et al., 2024): run the model once over a document and mean-pool the
contextual token states of a part of it (a sentence, the words that state a fact), instead of
embedding each part again on its own. A part then costs no model call, and its vector reads
the part in its document's context. Used by the graph and fact backends, whose parts cost
more model time than the document itself when embedded alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .vectors import MAX_EMBED_CHARS, normalise

_WORD = re.compile(r"\S+")
# Documents whose token states a caller holds at once while pooling their parts (64 docs of two
# windows: about 50 MB); their model passes run together (Embedder.token_states_many).
STATES_AT_ONCE = 64

#: A part of a document: character ranges [start, end) of the text as given (not as clipped).
Ranges = Sequence[tuple[int, int]]


@dataclass(frozen=True)
class ClipMap:
    """`clip_text(text)` with where each of its words starts in `text`, so positions in what
    the model read map back to the caller's text."""

    clipped: str
    clip_starts: np.ndarray  # word i starts at clip_starts[i] in clipped ...
    text_starts: np.ndarray  # ... and at text_starts[i] in the original text

    def to_text(self, positions: np.ndarray) -> np.ndarray:
        """Original-text positions of positions inside clipped (words keep their length;
        only the whitespace between them was collapsed)."""
        word = np.searchsorted(self.clip_starts, positions, side="right") - 1
        return self.text_starts[word] + (positions - self.clip_starts[word])


def clip_map(text: str) -> ClipMap:
    """What `base.clip_text` makes of text (whitespace runs to one space, cut to
    MAX_EMBED_CHARS), with the word positions of both."""
    clip_starts: list[int] = []
    text_starts: list[int] = []
    pieces: list[str] = []
    length = 0
    for m in _WORD.finditer(text[: MAX_EMBED_CHARS * 4]):
        if length >= MAX_EMBED_CHARS:
            break
        if pieces:
            pieces.append(" ")
            length += 1
        clip_starts.append(length)
        text_starts.append(m.start())
        pieces.append(m.group())
        length += len(m.group())
    return ClipMap("".join(pieces)[:MAX_EMBED_CHARS], np.asarray(clip_starts, dtype=np.int64),
                   np.asarray(text_starts, dtype=np.int64))


@dataclass(frozen=True)
class TokenStates:
    """A document's vector and its tokens' contextual states, each token with the character
    range it came from in the document's text ([-1, -1) for [CLS], [SEP] and prefix tokens,
    which belong to no part)."""

    vector: np.ndarray  # the document's unit vector: exactly what embed_documents gives
    states: np.ndarray  # (tokens, dim) float32
    starts: np.ndarray  # (tokens,) int64
    ends: np.ndarray

    @property
    def reach(self) -> int:
        """Characters of the text the states cover (a part beyond gets no pooled vector)."""
        return int(self.ends.max(initial=0))

    def pool(self, ranges: Ranges) -> np.ndarray | None:
        """The unit mean of the states of tokens overlapping any of ranges, or None when no
        token does (the part is empty, or lies beyond what the model read)."""
        if not len(self.states) or not ranges:
            return None
        # Tokens are in text order (those of no part, at -1, lead): the tokens overlapping a
        # range are one run, found by bisection rather than by comparing every token.
        rows: set[int] = set()
        for start, end in ranges:
            first = int(np.searchsorted(self.ends, start, side="right"))
            last = int(np.searchsorted(self.starts, end, side="left"))
            rows.update(range(first, last))
        if not rows:
            return None
        return normalise(self.states[sorted(rows)].mean(axis=0))[0]
