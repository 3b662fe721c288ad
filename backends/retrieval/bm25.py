"""BM25 through SQLite FTS5: the tokenizer (Porter stemming) and safe MATCH queries from free text."""

from __future__ import annotations

import re
import sqlite3

# Porter stemming over unicode61 words, diacritics folded (so "café" matches "cafe").
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"
# A query longer than this many distinct terms keeps its first ones: FTS5 cost grows with every
# OR'ed term, and a pasted page of text has found its match long before.
MAX_QUERY_TERMS = 64

_WORD = re.compile(r"\w+")

# Common English function words; dropped from queries (not from the index) because every doc
# matches them and their scores only add noise.
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves
""".split())


def query_terms(query: str) -> list[str]:
    """Distinct lower-cased words of a query without stop words; a query of only stop words
    keeps them all (so "to be or not to be" still searches)."""
    words = [w.lower() for w in _WORD.findall(query)]
    content = [w for w in words if w not in STOP_WORDS]
    return list(dict.fromkeys(content or words))[:MAX_QUERY_TERMS]


def match_expression(query: str) -> str | None:
    """An FTS5 MATCH string OR-ing the query's terms, each quoted so no character is syntax."""
    terms = query_terms(query)
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def search(conn: sqlite3.Connection, table: str, query: str, k: int) -> list[tuple[int, float]]:
    """(rowid, score) of the k best BM25 matches, best first; scores are positive."""
    expression = match_expression(query)
    if expression is None or k <= 0:
        return []
    rows = conn.execute(
        f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? "
        f"ORDER BY bm25({table}) LIMIT ?",
        (expression, k),
    ).fetchall()
    # FTS5's bm25() is negated so that ascending order is best first; flip it back.
    return [(int(rowid), -float(score)) for rowid, score in rows]
