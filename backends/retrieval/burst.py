"""Work comes in bursts: a strong match lends part of its score to its burst-mates.

A feature is built in a burst of commits that touch the same files, each with a short subject
("TableView.data() no longer uses .inspect", "sortable_columns_for_table() no longer uses
inspect"). A ticket years later that matches one commit of the old burst bears on the others,
though they may share none of its words: on the datasette development split, 36 of the 106
long-range relatives the related list missed had a doc that changed one of their files, at
most 10 docs away, among its first five.

Measured, it did not carry: +0.059 long-range R@5 on the development split it was fitted on,
-0.013 on four held-out histories (docs/memory-benchmarks.md, "Third try: bursts"), so
`burst_weight` is 0 (off) by default.

So each of the SOURCES best matches of a query lends `weight` times its score to every doc
within REACH docs of it in time that names one of the same file paths; a doc lent by several
matches (a burst several of them sit in) gains from each. What is read: the stored docs, their
time order and the paths their text names, at query time (nothing is derived and kept, so a
write by another process counts at the next query). A doc that names no path (a decision, a
conversation turn, a passage) lends and inherits nothing.
"""

from __future__ import annotations

import re
from typing import Sequence

from . import bm25

# Both fitted on the datasette development split (docs/memory-benchmarks.md, "Bursts"):
# 5 / 10 / 20 / 40 docs of reach and 5 / 10 sources were tried.
REACH = 10  # docs either side of a match, in time order, that count as its burst
SOURCES = 10  # the best matches that lend (twice what the agent is shown)

_TOKEN = re.compile(r"[^\s,;()\[\]\"'`<>]+")

Ranked = Sequence[tuple[int, float]]


def paths_of(text: str) -> frozenset[str]:
    """The file paths a doc's text names (bm25's notion of a path: an extension or two
    separators), without the end of a sentence after them."""
    found = set()
    for match in _TOKEN.finditer(text):
        token = match.group().rstrip(".:!?")
        if "/" in token or "." in token:
            if bm25._is_path(token):
                found.add(token)
    return frozenset(found)


def lend(fused: Ranked, around: dict[int, list[tuple[int, int, str]]], texts: dict[int, str],
         weight: float) -> tuple[list[tuple[int, float]], dict[int, tuple[int, int, str]]]:
    """`fused` (id, score, best first) with each of its first SOURCES lending `weight` × its
    score to the docs `around` it (source id -> [(id, docs away, text)]) that share a path with
    it; docs lent to join the candidates. Returns the new ranking (ties by id, older first) and,
    per doc that was lent to, its largest lender (source id, docs away, a shared path)."""
    if weight <= 0:
        return list(fused), {}
    scores = dict(fused)
    why: dict[int, tuple[int, int, str]] = {}
    best: dict[int, float] = {}
    for source, score in list(fused)[:SOURCES]:
        mine = paths_of(texts.get(source, ""))
        if not mine or score <= 0:
            continue
        for doc, away, text in around.get(source, ()):
            shared = mine & paths_of(text)
            if not shared:
                continue
            share = weight * score
            scores[doc] = scores.get(doc, 0.0) + share
            if share > best.get(doc, 0.0):
                best[doc] = share
                why[doc] = (source, away, min(shared))
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return ranked, why
