"""The bank's keyword index on PostgreSQL: FTS5's bm25 over a fact's text and context, computed
from postings (a fact's lexemes, counted per column) as the retrieval store's PostgreSQL BM25 is.

FTS5 weights a column by multiplying its term counts, takes a row's length over all columns and
floors idf = ln((N - n + 0.5) / (n + 0.5)) at 1e-6; so does the query below, with k1 = 1.2 and
b = 0.75. Words are split and stemmed as the retrieval store does on PostgreSQL (`analysed_words`,
the Snowball English configuration).
"""

from __future__ import annotations

from typing import Any, Sequence

from backends.pg_database import TS_CONFIG
from backends.retrieval.pg_store import K1, B, analysed_words

CONFIG = TS_CONFIG  # found on the search path, after the store's own schema

_LEXEMES = f"SELECT lexeme, cardinality(positions) FROM unnest(to_tsvector('{CONFIG}', ?))"

SEARCH = f"""
WITH terms AS (SELECT DISTINCT lexeme FROM unnest(to_tsvector('{CONFIG}', ?))),
hits AS (
    SELECT p.term, p.fact_id, p.tf_text + ? * p.tf_context AS tf, l.len
    FROM fact_postings p JOIN fact_lengths l ON l.fact_id = p.fact_id
    WHERE p.term IN (SELECT lexeme FROM terms)),
st AS (SELECT count(*)::float8 AS n, GREATEST(coalesce(avg(len), 0)::float8, 1e-9) AS avgdl
       FROM fact_lengths),
df AS (SELECT term, count(*)::float8 AS n FROM hits GROUP BY term),
idf AS (SELECT term, GREATEST(ln((st.n - df.n + 0.5) / (df.n + 0.5)), 1e-6) AS idf FROM df CROSS JOIN st)
SELECT h.fact_id,
       sum(idf.idf * h.tf * {K1 + 1}::float8
           / (h.tf + {K1}::float8 * ({1 - B}::float8 + {B}::float8 * h.len / st.avgdl))) AS score
FROM hits h JOIN idf ON idf.term = h.term CROSS JOIN st
GROUP BY h.fact_id ORDER BY score DESC, h.fact_id LIMIT ?"""


def lexemes(conn: Any, text: str, context: str) -> dict[str, tuple[int, int]]:
    """Each lexeme of a fact with its count in the text and in the context."""
    counts: dict[str, list[int]] = {}
    for column, value in enumerate((text, context)):
        words = analysed_words(value)
        if not words:
            continue
        for lexeme, n in conn.execute(_LEXEMES, (words,)):
            counts.setdefault(lexeme, [0, 0])[column] += int(n)
    return {term: (t, c) for term, (t, c) in counts.items()}


def search(conn: Any, terms: Sequence[str], k: int, context_weight: float) -> list[tuple[int, float]]:
    words = analysed_words(" ".join(terms))
    if not words or k <= 0:
        return []
    rows = conn.execute(SEARCH, (words, float(context_weight), k)).fetchall()
    return [(int(i), float(s)) for i, s in rows]


def count(conn: Any, term: str, cap: int) -> int:
    words = analysed_words(term)
    if not words:
        return 0
    return int(conn.execute(
        f"SELECT count(*) FROM (SELECT DISTINCT fact_id FROM fact_postings WHERE term IN "
        f"(SELECT lexeme FROM unnest(to_tsvector('{CONFIG}', ?))) LIMIT ?) AS found",
        (words, cap)).fetchone()[0])
