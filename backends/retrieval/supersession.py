"""Supersession: a later memory that amends an earlier decision ranks right above it, and the
earlier one stays in the results marked as superseded (with both dates).

Decided by a reason, not a fitted weight: the later memory says it amends (explicit words such
as "amended", "superseding", "instead", "no longer", "changed our mind"); the earlier one states
a decision (settled, decided, a rule, a policy, must, never...) and was stored strictly earlier
in time (docs stored at one time have no order); and the two are each other's closest (of the
earlier decisions, the one the later memory shares the largest share of distinctive words with,
Jaccard, and of the later amendments, the one the decision shares most with), with at least
MIN_SHARED words in common. One component, used by every backend that ranks by relevance over a
candidate pool (dense, hybrid, hipporag, hindsight).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

# Words by which a memory says it changes an earlier decision. The strong ones say it alone;
# the weak ones ("instead", "no longer") are everyday prose, and count only in a sentence that
# names a decision ("no longer the rule", "instead of the policy we agreed").
STRONG = re.compile(
    r"\b(?:amend(?:s|ed|ing|ment)?|supersed(?:e|es|ed|ing)|changed (?:our|my) minds?|"
    r"change of plan|(?:overrid|replac|revers)(?:e|es|ed|ing) the (?:old|earlier|previous|"
    r"original|decision|rule|policy))\b", re.IGNORECASE)
WEAK = re.compile(r"\b(?:instead|no longer|not anymore|from now on|going forward)\b",
                  re.IGNORECASE)
DECISION_WORD = re.compile(r"\b(?:rule|decision|decided|policy|settled|agreed|convention)\b",
                           re.IGNORECASE)
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n")
# Words by which a memory states a decision (what an amendment can supersede).
DECIDES = re.compile(
    r"\b(?:settled|decided|decision|rule|policy|agreed|convention|must|never|always|"
    r"from now on|going forward)\b", re.IGNORECASE)
WORD = re.compile(r"[a-z][a-z0-9_]{3,}")
# Words of every chat or commit that say nothing about a subject.
STOP = frozenset("""user assistant that this with from have what when which them they then than
there their about into only also just should would could will does doing been were where
your ours here over more most some such each other because while after before same still
these those need needs like make made right yes okay agreed""".split())
MIN_SHARED = 3  # fewer shared subject words than this is no restatement of the same rule


@dataclass(frozen=True)
class Memory:
    """A candidate: its id in the store, its text, and when it was stored (unix seconds)."""

    id: int
    text: str
    time: float


def amends(text: str) -> bool:
    """Whether a memory says in words that it changes an earlier decision."""
    if STRONG.search(text):
        return True
    return any(WEAK.search(part) and DECISION_WORD.search(part)
               for part in SENTENCE.split(text) if part)


def decides(text: str) -> bool:
    """Whether a memory states a decision an amendment could supersede."""
    return DECIDES.search(text) is not None


def _terms(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOP}


def superseded_by(pool: Sequence[Memory]) -> dict[int, int]:
    """earlier id -> the id of the later memory in the pool that amends it."""
    terms = {m.id: _terms(m.text) for m in pool}
    if len(pool) >= 4:  # words in most of the pool name no subject of their own
        counts: dict[str, int] = {}
        for words in terms.values():
            for w in words:
                counts[w] = counts.get(w, 0) + 1
        common = {w for w, n in counts.items() if n > len(pool) / 2}
        terms = {i: words - common for i, words in terms.items()}
    def share(a: int, b: int) -> float:
        return len(terms[a] & terms[b]) / (len(terms[a] | terms[b]) or 1)

    later_ones = [m for m in pool if amends(m.text)]
    decisions = [m for m in pool if decides(m.text)]
    out: dict[int, int] = {}
    for later in sorted(later_ones, key=lambda m: (m.time, m.id)):
        # Later in time, not in storage order: docs stored at one time (a batch of passages
        # with no dates, MuSiQue's Wikipedia) have no order between them, and an encyclopedia
        # passage that says "superseded" amends none of its neighbours.
        earlier = [m for m in decisions if m.time < later.time]
        best = max(earlier, key=lambda m: (share(m.id, later.id), m.time, m.id), default=None)
        if best is None or len(terms[best.id] & terms[later.id]) < MIN_SHARED:
            continue
        # Each the other's closest: the earlier decision is restated by no other amendment
        # after it more than by this one (two decisions on different subjects that happen to
        # share words are not each other's closest).
        rivals = [m for m in later_ones if m.time > best.time]
        if max(rivals, key=lambda m: (share(best.id, m.id), -m.time, -m.id)).id == later.id:
            out[best.id] = later.id  # a newer amendment of the same rule replaces an older one
    return out


def latest(doc: int, by: dict[int, int]) -> int:
    """The end of a chain of amendments (each later one amending the one before)."""
    seen = {doc}
    while doc in by and by[doc] not in seen:
        doc = by[doc]
        seen.add(doc)
    return doc


def reorder(ranked: list[tuple[int, float]], k: int,
            pool: Sequence[Memory]) -> tuple[list[tuple[int, float]], dict[int, int]]:
    """The top k of `ranked` with each superseded memory's amendment (from `pool`) right above
    it, and {earlier id: later id} for the pairs the result holds both of."""
    by = superseded_by(pool)
    if not by:
        return ranked[:k], {}
    scores = dict(ranked)
    out = [doc for doc, _ in ranked[:k]]
    for doc in list(out):
        if doc not in by:
            continue
        newer = latest(doc, by)
        if newer in out and out.index(newer) < out.index(doc):
            continue
        if newer in out:
            out.remove(newer)
        out.insert(out.index(doc), newer)
    out = out[:k]
    # The amendment takes at least the score of what it supersedes; scores stay best first.
    result: list[tuple[int, float]] = []
    for doc in out:
        score = max([scores.get(doc, 0.0)] + [scores.get(e, 0.0) for e, n in by.items()
                                              if n == doc and e in scores])
        result.append((doc, min(score, result[-1][1]) if result else score))
    held = set(out)
    pairs = {e: latest(e, by) for e in by if e in held and latest(e, by) in held}
    return result, pairs


def day(timestamp: float) -> str:
    """A memory's date as the block shows it (UTC)."""
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).date().isoformat()


def marks(ids: list[int], pairs: dict[int, int],
          times: dict[int, float]) -> list[dict[str, Any]]:
    """Each superseded doc of a result: its position, the position of the doc amending it, and
    both dates (what the "Memories invoked" block shows)."""
    at = {doc: pos for pos, doc in enumerate(ids)}
    return [{"doc": at[e], "by": at[n], "date": day(times[e]), "by_date": day(times[n])}
            for e, n in sorted(pairs.items(), key=lambda p: at.get(p[0], 0))
            if e in at and n in at]
