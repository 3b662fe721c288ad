"""BM25 through SQLite FTS5: the tokenizer (Porter stemming) and safe MATCH queries from free text."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator

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


# Developer text names things with identifiers: paths (datasette/views/table.py), snake_case,
# dotted.names, kebab-case options, CamelCase. unicode61 splits them at every '_', '/' and '.'
# (so a path shares most of its words with every file beside it) and never at a CamelCase hump.
_IDENT = re.compile(r"[A-Za-z_][\w]*(?:[./:-]+\w+)+|\w*[a-z][A-Z]\w*|[A-Z]{2,}[a-z]\w*|[A-Za-z]\w*_\w+")
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_JOIN = re.compile(r"[\W_]+")
CODE_TERMS = "code-v1"  # recorded by stores whose FTS rows carry code_terms (see fts_text)
# _IDENT backtracks over a run of word characters from every start in it (`\w*[a-z][A-Z]` tries
# each split), so one long run costs its length squared: a 40,000-character "word" held the GIL
# for 35 s. Its matches never leave a run of word characters and `./:-`, so it is run inside each
# such run (found in linear time), and a run longer than any identifier a person names (a hash
# dump, base64, minified code) gives no code terms: the cost is linear in the text.
_RUN = re.compile(r"[\w./:-]+")
MAX_IDENT_CHARS = 200


def code_terms(text: str) -> list[str]:
    """Extra words for identifiers in text: each identifier joined into one word (so naming it
    exactly outweighs sharing its common parts), a path's file name joined on its own (a query
    names `table.py` without its folder), and CamelCase split into its words."""
    terms: list[str] = []
    for ident in _identifiers(text[:200_000]):
        joined = _JOIN.sub("", ident).lower()
        if len(joined) > 2:
            terms.append(joined)
        if "/" in ident:
            name = _JOIN.sub("", ident.rsplit("/", 1)[1]).lower()
            if len(name) > 2:
                terms.append(name)
        humps = _HUMP.sub(" ", ident)
        if humps != ident:
            terms.extend(w.lower() for w in _WORD.findall(humps))
    return list(dict.fromkeys(terms))


def _identifiers(text: str) -> Iterator[str]:
    """_IDENT's matches in text, in order, from runs of at most MAX_IDENT_CHARS characters."""
    for run in _RUN.finditer(text):
        if run.end() - run.start() <= MAX_IDENT_CHARS:
            yield from (match.group() for match in _IDENT.finditer(run.group()))


# Tokens as a path is written in text (split at spaces, commas and brackets).
_TOKEN = re.compile(r"[^\s,;()\[\]\"'`<>]+")
_FILE_EXT = re.compile(r"\.(?:py|pyi|js|ts|tsx|jsx|html|css|md|rst|txt|yml|yaml|json|toml|cfg|ini|sql|sh|c|h|cpp|"
                       r"go|rs|java|rb|php|lock)\}?$")
_LETTERS = re.compile(r"[^\W\d_]{3,}")


def _is_path(token: str) -> bool:
    """`datasette/views/table.py`, `docs/{a.rst`, `a/b/c`, `setup.py`; not `and/or`, `TCP/IP`
    or a date such as `5/8/2023` (a path has a file extension or two separators, and letters)."""
    token = token.rstrip(".:!?")  # the end of a sentence
    if not any(ch.isalpha() for ch in token):
        return False
    if "/" in token:
        return bool(_FILE_EXT.search(token)) or token.count("/") >= 2
    return bool(_FILE_EXT.search(token)) and token.lstrip(".")[:1].isalnum()  # .travis.yml too


def without_paths(text: str) -> str:
    """The text without its file paths, for a sentence embedder; the text itself when nothing
    but paths (and punctuation) would be left.

    A sentence embedder reads prose: a list of paths is outside what it was trained on, and two
    such lists look alike to it whatever files they name, so a per-turn query ("... Changed
    a.py, b/c.py") would rank old tickets that touched many files over the one that bears on
    it. BM25's code terms match paths exactly; hybrid gives each half what it reads well.
    """
    prose = _prose(text)
    return prose if _LETTERS.search(prose) else text


def names_only_paths(text: str) -> bool:
    """True when the text is file paths and punctuation only (`app/export.py`): nothing in it
    for a sentence embedder to read."""
    return _LETTERS.search(_prose(text)) is None and _LETTERS.search(text) is not None


# A removed path takes the list separator after it ("a.py, b.py" leaves no ", " behind).
_PATH_SEP = re.compile(r"\s*[,;]")


def _prose(text: str) -> str:
    parts: list[str] = []
    at = 0
    for match in _TOKEN.finditer(text):
        if match.start() < at or not _is_path(match.group()):
            continue
        parts.append(text[at:match.start()])
        parts.append(" ")
        sep = _PATH_SEP.match(text, match.end())
        at = sep.end() if sep else match.end()
    parts.append(text[at:])
    return "".join(parts)


def fts_text(text: str) -> str:
    """What a store with CODE_TERMS indexes for a doc: its text plus its code terms."""
    extra = code_terms(text)
    return f"{text}\n{' '.join(extra)}" if extra else text


def query_terms(query: str, code: bool = False) -> list[str]:
    """Distinct lower-cased words of a query without stop words, then its code terms; a query
    of only stop words keeps them all (so "to be or not to be" still searches)."""
    words = [w.lower() for w in _WORD.findall(query)]
    if code:
        words += code_terms(query)
    content = [w for w in words if w not in STOP_WORDS]
    return list(dict.fromkeys(content or words))[:MAX_QUERY_TERMS]


def match_expression(query: str, code: bool = False) -> str | None:
    """An FTS5 MATCH string OR-ing the query's terms, each quoted so no character is syntax."""
    terms = query_terms(query, code)
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def search(conn: sqlite3.Connection, table: str, query: str, k: int,
           code: bool = False) -> list[tuple[int, float]]:
    """(rowid, score) of the k best BM25 matches, best first; scores are positive. `code`:
    the table's rows carry code terms (fts_text), so the query's are searched too."""
    expression = match_expression(query, code)
    if expression is None or k <= 0:
        return []
    rows = conn.execute(
        f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? "
        f"ORDER BY bm25({table}) LIMIT ?",
        (expression, k),
    ).fetchall()
    # FTS5's bm25() is negated so that ascending order is best first; flip it back.
    return [(int(rowid), -float(score)) for rowid, score in rows]
