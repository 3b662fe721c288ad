"""The words a repository's own issue threads teach (HybridOptions.thread_expansion, off by default).

Work comes in issue threads, and a later ticket of a thread often shares no word with the
earlier ones: on the datasette development split 61 of the 106 long-range relatives the default
missed shared no content word with the query (docs/bench-runs/longrange/analysis6.md). The
stored docs that name the same issue (`#418`) are pairs of thread-mates, and over those pairs
some words of one ticket predict words of its mates ("count", "timeout" -> "inspect"): a
translation model in the sense of Berger and Lafferty (SIGIR 1999), used here as word-association
query expansion. The query is expanded by the words most associated with its own, and that
expansion is searched over every stored doc (docs/bench-runs/longrange/plan7.md has every
constant's source):

- a pair (d, d') of one thread of n docs weighs 1/n: an umbrella issue thirty tickets name says
  less about any two of them, as a word in many docs does (IDF's reason); no size cut;
- association(q, w) is pointwise mutual information over the weighted pairs, kept when the two
  words were seen in at least MIN_SUPPORT pairs of docs (one pair is one coincidence) and it is
  above 0; the conditional probability P(w|q) would rank "ticket", "changed" first for every q;
- the TERMS best words by summed association form the expansion (RM3's fbTerms default).

What is read: the stored docs only (completed, earlier work, whose text names its issues); the
query's own refs are never looked for. A store whose docs name no issue teaches nothing, and
the ranking is then hybrid's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from .bm25 import STOP_WORDS
from .issues import issues_of, without_issues

TERMS = 10  # expansion words: Anserini's RM3 fbTerms default (Abdul-Jaleel et al., TREC 2004)
MIN_SUPPORT = 2  # pairs of docs a word pair must be seen in: one pair is one coincidence
# The query itself keeps half the lexical weight, RM3's originalQueryWeight (Anserini's default
# 0.5), the expansion's list the other half: hybrid splits its lexical half equally over its
# lexical lists, which with this one list is that 0.5.

PMI_FLOOR = 1e-9  # rounding, not a threshold: PMI is kept when it is above 0

_LETTERS = re.compile(r"[a-z]{3,}")


def words_of(text: str) -> frozenset[str]:
    """A text's content words: lower-cased runs of 3+ letters, less stop words, its issue refs
    taken out; each counted once (presence, not frequency)."""
    plain = without_issues(text[:200_000]).lower()
    return frozenset(w for w in _LETTERS.findall(plain) if w not in STOP_WORDS)


@dataclass
class Expansion:
    """The expansion of one query: its words, best first, and per word the query words that
    led to it (best first)."""

    terms: list[str] = field(default_factory=list)
    because: dict[str, list[str]] = field(default_factory=dict)

    def query(self) -> str:
        return " ".join(self.terms)


class Associations:
    """The word association table of a store's issue threads, rebuilt from its docs' texts when
    they change; each doc's words are read once per text."""

    def __init__(self) -> None:
        # scipy loads here, not with the module: a quarter second of every `middle` command that
        # opens a store, for a table only thread_expansion builds
        from scipy import sparse

        self._docs: dict[int, tuple[str, frozenset[str], frozenset[int]]] = {}
        self._key: str | None = None
        self._vocab: dict[str, int] = {}
        self._words: list[str] = []
        self._x = sparse.csr_matrix((0, 0))  # threaded docs x words, 1 where the doc has it
        self._m = sparse.csr_matrix((0, 0))  # pair weight x words: C(q, w) = X[:, q]' M[:, w]
        self._m0 = sparse.csr_matrix((0, 0))  # the same, pairs counted (support)
        self._marginal = np.zeros(0)  # C(w): weight of the pairs whose one doc has w
        self._total = 0.0  # C: every pair's weight

    @property
    def key(self) -> str | None:
        """The store fingerprint the table was last built for."""
        return self._key

    def update(self, key: str, texts: dict[int, str]) -> None:
        """The table for the store's docs `texts` (id -> text), known by `key` (the store's
        fingerprint): nothing is done when the key is the one last built."""
        if key == self._key:
            return
        docs: dict[int, tuple[str, frozenset[str], frozenset[int]]] = {}
        for i, text in texts.items():
            known = self._docs.get(i)
            docs[i] = known if known is not None and known[0] == text else (
                text, words_of(text), issues_of(text))
        self._docs = docs
        self._build()
        self._key = key

    def _build(self) -> None:
        from scipy import sparse

        threads: dict[int, list[int]] = {}
        for i, (_, _, refs) in self._docs.items():
            for issue in refs:
                threads.setdefault(issue, []).append(i)
        threads = {t: members for t, members in threads.items() if len(members) >= 2}
        threaded = sorted({i for members in threads.values() for i in members})
        row = {i: n for n, i in enumerate(threaded)}
        vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        for i in threaded:
            for w in self._docs[i][1]:
                rows.append(row[i])
                cols.append(vocab.setdefault(w, len(vocab)))
        n_docs, n_words = len(threaded), len(vocab)
        x = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_docs, n_words))
        a: list[int] = []
        b: list[int] = []
        weight: list[float] = []
        for members in threads.values():
            share = 1.0 / len(members)  # a pair of a thread of n docs weighs 1/n
            for d in members:
                for mate in members:
                    if d != mate:
                        a.append(row[d])
                        b.append(row[mate])
                        weight.append(share)
        w = sparse.csr_matrix((weight, (a, b)), shape=(n_docs, n_docs))  # duplicates summed
        w0 = sparse.csr_matrix((np.ones(len(a)), (a, b)), shape=(n_docs, n_docs))
        self._vocab, self._x = vocab, x
        self._words = sorted(vocab, key=vocab.__getitem__)
        self._m = (w @ x).tocsr()
        self._m0 = (w0 @ x).tocsr()
        self._marginal = np.asarray(x.T @ np.asarray(w.sum(axis=1)).ravel()).ravel()
        self._total = float(w.sum())

    def expand(self, query: str, terms: int = TERMS) -> Expansion:
        """The `terms` words most associated (summed positive PMI) with the query's words,
        none of them the query's own."""
        own = words_of(query)
        cols = sorted(self._vocab[q] for q in own if q in self._vocab)
        if not cols or self._total <= 0:
            return Expansion()
        xq = self._x[:, cols].T.tocsr()  # query word x threaded doc
        joint = (xq @ self._m).toarray()  # C(q, w)
        support = (xq @ self._m0).toarray()  # pairs of docs the two words were seen in
        cq = self._marginal[cols][:, None]
        cw = self._marginal[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            pmi = np.log(joint * self._total / (cq * cw))
        # Above 0 by more than rounding: a word every thread-mate has ("ticket", "changed") has
        # PMI log(1), which the sums above can make 1e-16 (found after the development run).
        keep = (support >= MIN_SUPPORT) & (joint > 0) & np.isfinite(pmi) & (pmi > PMI_FLOOR)
        pmi = np.where(keep, pmi, 0.0)
        pmi[:, cols] = 0.0  # a query word is no expansion of itself
        score = pmi.sum(axis=0)
        best = [j for j in np.flatnonzero(score > 0)]
        best.sort(key=lambda j: (-score[j], self._words[j]))
        chosen = best[:terms]
        own_words = [self._words[c] for c in cols]
        because = {}
        for j in chosen:
            led = [(pmi[n, j], own_words[n]) for n in range(len(cols)) if pmi[n, j] > 0]
            because[self._words[j]] = [q for _, q in sorted(led, key=lambda p: (-p[0], p[1]))]
        return Expansion([self._words[j] for j in chosen], because)


def matched(expansion: Expansion, text: str) -> list[str]:
    """The expansion's words a doc's text has, in the expansion's order."""
    have = words_of(text)
    return [w for w in expansion.terms if w in have]


def explain_line(words: Iterable[str], expansion: Expansion) -> str:
    """`--explain`'s line for a doc the expansion matched."""
    found = list(words)
    led = list(dict.fromkeys(q for w in found for q in expansion.because.get(w, [])))[:4]
    quoted = ", ".join(f'"{w}"' for w in found[:4])
    by = ", ".join(f'"{q}"' for q in led)
    return (f"thread words: matches {quoted} (words the issue thread-mates of earlier tickets "
            f"with {by} used)")
