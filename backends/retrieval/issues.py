"""Work comes in issue threads: a doc naming an issue one of the query's best matches names
belongs with them (HybridOptions.issue_hop, off by default).

A feature's tickets all name its issue ("#418"), and a later ticket of the thread often shares no
word with the earlier ones ("Show 'many rows' if count times out" against "expand_foreign_keys()
no longer uses inspect"). On the datasette development split 82 of the 106 long-range relatives
the default missed were one hop, through an issue ref, from a doc hybrid already returned
(docs/bench-runs/longrange/analysis6.md). So the issues the first k fused docs name (k: as many
as the caller asked for) are followed to every stored doc naming one of them; that hop list,
ranked by each doc's best lender's place, is joined to the fused list by reciprocal rank fusion
(1/(RRF_K + rank) per list; Cormack et al. 2009's constant): nothing is fitted.

What is read: stored docs only (completed, earlier work), never an issue tracker; the query's
own refs are not looked for. A doc that names no issue (a decision, a conversation turn, a
passage) lends and gains nothing.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

RRF_K = 60  # Cormack, Clarke and Buettcher (2009); hybrid's own rrf_k default

# `#123` as an issue: not an HTML entity (`&#123;`), not part of a word or a URL fragment
# (`abc#1`), not a longer number's tail. Nine digits at most: no tracker numbers beyond that.
_ISSUE = re.compile(r"(?<![\w&#/])#(\d{1,9})(?!\d)")

Ranked = Sequence[tuple[int, float]]


# The same refs found from each `#` (a pattern that opens with a look-behind is tried at every
# place of the text: 50 µs a doc, 5 s over 100,000 docs; from the `#`s, 20 times less), the
# character before it then checked as _ISSUE's look-behind does.
_AFTER_HASH = re.compile(r"#(\d{1,9})(?!\d)")
_NOT_BEFORE = re.compile(r"[\w&#/]")


def issues_of(text: str) -> frozenset[int]:
    """The issue numbers a doc's text names (`#123`)."""
    if "#" not in text:
        return frozenset()
    return frozenset(int(m.group(1)) for m in _AFTER_HASH.finditer(text)
                     if m.start() == 0 or not _NOT_BEFORE.match(text, m.start() - 1))


def without_issues(text: str) -> str:
    """The text with its issue refs (`#123`) taken out (a space each)."""
    return _ISSUE.sub(" ", text)


def needle(issue: int) -> str:
    """What a store looks for first (a substring: LIKE '%#123%'); issues_of then confirms it."""
    return f"#{issue}"


def hop(fused: Ranked, k: int, texts: dict[int, str],
        naming: Callable[[int], Sequence[tuple[int, str]]]
        ) -> tuple[list[tuple[int, float]], dict[int, tuple[int, int]]]:
    """`fused` (id, score, best first) joined with the docs its first k name issues with.

    `texts` holds the lenders' texts (id -> text); `naming(issue)` gives the stored docs whose
    text may name the issue, (id, text), newest first (confirmed here). Returns the new order,
    each id with its reciprocal-rank score scaled to [0, 1] (the best possible, first in both
    lists, is 1), and per doc reached by the hop its lender (lender id, issue)."""
    place = {i: n for n, (i, _) in enumerate(fused)}
    lender_of: dict[int, tuple[int, int]] = {}
    hop_rank: dict[int, int] = {}
    for rank, (lender, _) in enumerate(list(fused)[:k]):
        for issue in sorted(issues_of(texts.get(lender, ""))):
            for doc, text in naming(issue):
                if doc == lender or doc in hop_rank or issue not in issues_of(text):
                    continue
                hop_rank[doc] = rank
                lender_of[doc] = (lender, issue)
    if not hop_rank:
        return list(fused), {}
    # The hop list: by the best lender's place, then the doc's own fused place, then newer
    # (a larger id) first.
    unplaced = len(place)
    order = sorted(hop_rank, key=lambda d: (hop_rank[d], place.get(d, unplaced), -d))
    in_hop = {d: n for n, d in enumerate(order)}
    best = 2.0 / (RRF_K + 1)
    scores: dict[int, float] = {}
    for doc in place.keys() | in_hop.keys():
        s = 0.0
        if doc in place:
            s += 1.0 / (RRF_K + 1 + place[doc])
        if doc in in_hop:
            s += 1.0 / (RRF_K + 1 + in_hop[doc])
        scores[doc] = s / best
    ranked = sorted(scores.items(), key=lambda item: (-item[1], place.get(item[0], unplaced), -item[0]))
    return ranked, lender_of
