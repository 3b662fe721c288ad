"""An issue thread scored as one document (HybridOptions.thread_docs, off by default).

Work comes in issue threads, and a later ticket of a thread often shares no word with the query
while the thread as a whole does: on the datasette development split 61 of the 106 long-range
relatives the default missed shared no content word with the query, and 82 of them were one
issue-hop from a doc hybrid returned (docs/bench-runs/longrange/analysis6.md). The sixth try
(retrieval.issues) followed the threads of the single best docs, and those lenders were mostly
wrong. This is cluster-based retrieval instead (Liu and Croft, SIGIR 2004; Kurland and Lee,
SIGIR 2004): the query is scored against each thread as a whole, and a doc's score is smoothed
with its thread's (docs/bench-runs/longrange/plan8.md has every choice's reason):

- a thread: the stored docs whose text names one issue (`#418`, issues.issues_of); a doc naming
  several issues belongs to each; only threads of 2 or more docs (a thread of one doc is that
  doc, which hybrid's own BM25 list already scores);
- its pseudo-document: the members' texts joined, indexed as the store indexes a doc (the same
  FTS5 tokenizer, the code terms when the store has them), scored by FTS5's BM25 (its own k1 =
  1.2, b = 0.75). Length normalisation is what keeps an umbrella thread, thirty tickets long,
  from winning by its size, as it keeps any long document from winning by its length;
- the thread list: the members of the best threads, each scored by its best thread's score,
  the members of one thread ordered by their own fused score.

What is read: the stored docs only (completed, earlier work, whose text names its issues); the
query's own refs are never looked for. A store whose docs name no issue has no thread, and the
ranking is then hybrid's own.

The collection lives in memory (an SQLite FTS5 table of `:memory:`: no file, no pickle) and
follows the store's fingerprint: only the threads whose members changed are rewritten.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field
from typing import Mapping

from . import bm25
from .issues import issues_of

MIN_THREAD = 2  # docs naming one issue before it is a thread: one doc is only itself


@dataclass
class ThreadList:
    """The thread list of one query: (doc id, its best thread's score), best first, and per doc
    the thread (issue) that gave it that score."""

    ranked: list[tuple[int, float]] = field(default_factory=list)
    thread_of: dict[int, int] = field(default_factory=dict)


class ThreadIndex:
    """The issue threads of a store's docs as BM25-scored pseudo-documents, rebuilt thread by
    thread when the store's docs change."""

    def __init__(self) -> None:
        # One connection per index, used under its own lock (a backend's retrieves and
        # explains may come from several threads of one process).
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.execute(
            f"CREATE VIRTUAL TABLE threads USING fts5(text, tokenize='{bm25.FTS_TOKENIZE}')")
        self._lock = threading.Lock()
        self._docs: dict[int, tuple[str, frozenset[int]]] = {}
        self._members: dict[int, list[int]] = {}  # issue -> its docs' ids, oldest first
        self._key: str | None = None
        self._code = False

    @property
    def key(self) -> str | None:
        """The store fingerprint the collection was last built for."""
        return self._key

    def close(self) -> None:
        self._conn.close()

    def update(self, key: str, texts: Mapping[int, str], code: bool = False) -> None:
        """The collection for the store's docs `texts` (id -> text), known by `key` (its
        fingerprint); `code`: the store indexes code terms (bm25.fts_text), so the threads do
        too. Nothing is done when the key is the one last built."""
        with self._lock:
            if key == self._key and code == self._code:
                return
            docs: dict[int, tuple[str, frozenset[int]]] = {}
            touched: set[int] = set()
            for i, text in texts.items():
                known = self._docs.get(i)
                if known is not None and known[0] == text:
                    docs[i] = known
                    continue
                docs[i] = (text, issues_of(text))
                touched |= docs[i][1] | (known[1] if known else frozenset())
            for i in self._docs.keys() - docs.keys():  # forgotten docs leave their threads
                touched |= self._docs[i][1]
            if code != self._code:  # every pseudo-document is indexed anew
                touched |= set(self._members)
                touched |= {issue for _, refs in docs.values() for issue in refs}
            self._docs, self._code = docs, code
            members: dict[int, list[int]] = {issue: [] for issue in touched}
            for i in sorted(docs):
                for issue in docs[i][1] & touched:
                    members[issue].append(i)
            with self._conn:
                for issue, ids in members.items():
                    self._conn.execute("DELETE FROM threads WHERE rowid = ?", (issue,))
                    if len(ids) < MIN_THREAD:
                        self._members.pop(issue, None)
                        continue
                    self._members[issue] = ids
                    text = "\n".join(self._indexed(docs[i][0]) for i in ids)
                    self._conn.execute("INSERT INTO threads(rowid, text) VALUES (?, ?)", (issue, text))
            self._key = key

    def _indexed(self, text: str) -> str:
        return bm25.fts_text(text) if self._code else text

    def threads(self, query: str, n: int) -> list[tuple[int, float]]:
        """The n threads best matching the query: (issue, BM25 score), best first."""
        with self._lock:
            return bm25.search(self._conn, "threads", query, n, self._code)

    def members(self, issue: int) -> list[int]:
        """The ids of a thread's docs, oldest first (empty: no thread of 2+ docs)."""
        with self._lock:
            return list(self._members.get(issue, []))

    def thread_list(self, query: str, pool: int, own: Mapping[int, float]) -> ThreadList:
        """The members of the `pool` best threads, each scored by its best thread's score,
        those of one thread ordered by their own fused score `own` (a member outside it after
        those in it, newer first), cut at `pool` docs."""
        found = ThreadList()
        best: dict[int, tuple[float, int]] = {}  # doc -> (its best thread's score, that issue)
        for issue, score in self.threads(query, pool):
            for doc in self.members(issue):
                if doc not in best:  # threads come best first: the first one is its best
                    best[doc] = (score, issue)
        order = sorted(best, key=lambda d: (-best[d][0], d not in own, -own.get(d, 0.0), -d))
        for doc in order[:pool]:
            found.ranked.append((doc, best[doc][0]))
            found.thread_of[doc] = best[doc][1]
        return found

    def matched_words(self, issue: int, query: str) -> list[str]:
        """The query's words (as the store's BM25 reads them) that the thread's
        pseudo-document holds, in the query's order."""
        with self._lock:
            out = []
            for term in bm25.query_terms(query, self._code):
                expression = '"' + term.replace('"', '""') + '"'
                hit = self._conn.execute(
                    "SELECT 1 FROM threads WHERE threads MATCH ? AND rowid = ?",
                    (expression, issue)).fetchone()
                if hit:
                    out.append(term)
            return out


def explain_line(issue: int, words: list[str], size: int) -> str:
    """`--explain`'s line for a doc the thread list scored."""
    quoted = ", ".join(f'"{w}"' for w in words[:4])
    matches = f" matches {quoted}" if quoted else ""
    return f"thread #{issue}{matches} ({size} docs)"
