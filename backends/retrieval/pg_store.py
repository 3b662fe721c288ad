"""The retrieval store on PostgreSQL: a project's docs, pgvector vectors and BM25 postings, behind the
interface of the SQLite RetrievalStore."""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from collections import Counter
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import numpy as np

from backends import pg_database
from backends.pg_database import TS_CONFIG
from backends.pg_storage import prune_writes
from backends.storage import MetaValues, hash_range
from orchestrator.plugin_api import MemoryDatabase

from . import bm25, outside
from .store import DocRow, MemoryRecord, doc_hash

# Okapi BM25 as SQLite FTS5 computes it (k1 = 1.2, b = 0.75, idf = ln((N - n + 0.5) / (n + 0.5))
# floored at 1e-6), so min-max fusion gets the same keyword ranking on either engine.
K1, B = 1.2, 0.75
MAX_ANALYSED_CHARS = 200_000  # a tsvector holds at most 1 MB: the words of a doc's start count
_WORD = re.compile(r"[^\W_]+")  # unicode61's tokens: letters and digits; '_' separates
_JOINED = re.compile(r"[\W_]+")

LEXEMES = f"SELECT lexeme, cardinality(positions) AS tf FROM unnest(to_tsvector('{TS_CONFIG}', %(words)s))"
# A doc's postings written add one to each of its terms' document frequency: the write returns
# its terms, and the transaction adds them all up to retrieval_df once, before it commits
# (PgRetrievalStore.fold_df; a row per term and doc, or a trigger's transition table per doc,
# cost a third more on indexing). Removals are counted by the postings' delete trigger, so a
# doc another program deletes, its postings going by cascade, counts too (see pg_database).
TERMS = "(SELECT array_agg(lexeme) FROM lex)"

INSERT = f"""
WITH lex AS ({LEXEMES}),
doc AS (
    INSERT INTO retrieval_docs (store_id, hash, text, created_at, doc_time, importance, doc_len)
    SELECT %(store)s, %(hash)s, %(text)s, %(now)s, %(time)s, %(importance)s,
           coalesce((SELECT sum(tf) FROM lex), 0)
    ON CONFLICT (store_id, hash) DO NOTHING
    RETURNING id, doc_len),
post AS (
    INSERT INTO retrieval_postings (store_id, term, doc_id, tf, doc_len)
    SELECT %(store)s, lex.lexeme, doc.id, lex.tf, doc.doc_len FROM lex CROSS JOIN doc)
UPDATE retrieval_stores SET n_docs = n_docs + 1, total_len = total_len + doc.doc_len
FROM doc WHERE retrieval_stores.id = %(store)s
RETURNING doc.id, {TERMS}"""

REPLACE = f"""
WITH lex AS ({LEXEMES}),
old AS (SELECT doc_len FROM retrieval_docs WHERE id = %(id)s AND store_id = %(store)s),
doc AS (
    UPDATE retrieval_docs SET hash = %(hash)s, text = %(text)s, doc_time = %(time)s,
        importance = LEAST(5, GREATEST(importance, %(importance)s) + 1),
        doc_len = coalesce((SELECT sum(tf) FROM lex), 0)
    WHERE id = %(id)s AND store_id = %(store)s
    RETURNING id, doc_len),
post AS (
    INSERT INTO retrieval_postings (store_id, term, doc_id, tf, doc_len)
    SELECT %(store)s, lex.lexeme, doc.id, lex.tf, doc.doc_len FROM lex CROSS JOIN doc)
UPDATE retrieval_stores SET total_len = total_len - old.doc_len + doc.doc_len
FROM doc, old WHERE retrieval_stores.id = %(store)s
RETURNING doc.id, {TERMS}"""

# A doc's postings and length again from its text now (a doc another program wrote); the
# store's totals are counted again after (PgRetrievalStore._catch_up).
REPOST = f"""
WITH lex AS ({LEXEMES}),
doc AS (
    UPDATE retrieval_docs SET hash = %(hash)s, doc_len = coalesce((SELECT sum(tf) FROM lex), 0)
    WHERE id = %(id)s AND store_id = %(store)s
    RETURNING id, doc_len)
INSERT INTO retrieval_postings (store_id, term, doc_id, tf, doc_len)
SELECT %(store)s, lex.lexeme, doc.id, lex.tf, doc.doc_len FROM lex CROSS JOIN doc
RETURNING term"""

# The idf of each query term from its document frequency as retrieval_df keeps it, with the deltas
# other writers left not folded into it yet (exact: middle's writes add their counts before they
# commit, see fold_df and pg_database), so only the scoring reads postings. A count above the
# store's docs (a table changed by hand) gets the floor rather than failing every search. Each
# doc's terms are summed in term order: in the plan's order, two docs of equal score (terms at
# the idf floor) could differ in the last bit, and their order flip from one search to the next.
BM25 = f"""
WITH terms AS (SELECT DISTINCT lexeme FROM unnest(to_tsvector('{TS_CONFIG}', %(words)s))),
st AS (SELECT n_docs::float8 AS n_docs,
              GREATEST(total_len::float8 / GREATEST(n_docs, 1), 1e-9) AS avgdl
       FROM retrieval_stores WHERE id = %(store)s),
df AS (SELECT term, sum(n)::float8 AS n FROM (
           SELECT term, n FROM retrieval_df WHERE store_id = %(store)s AND term IN (SELECT lexeme FROM terms)
           UNION ALL
           SELECT term, d FROM retrieval_df_delta WHERE store_id = %(store)s AND term IN (SELECT lexeme FROM terms)
       ) counts GROUP BY term HAVING sum(n) > 0),
idf AS (SELECT df.term, GREATEST(ln(GREATEST((st.n_docs - df.n + 0.5) / (df.n + 0.5), 1e-300)), 1e-6) AS idf
        FROM df CROSS JOIN st)
SELECT p.doc_id,
       sum(idf.idf * p.tf * {K1 + 1}::float8
           / (p.tf + {K1}::float8 * ({1 - B}::float8 + {B}::float8 * p.doc_len / st.avgdl))
           ORDER BY idf.term) AS score
FROM idf JOIN retrieval_postings p ON p.store_id = %(store)s AND p.term = idf.term CROSS JOIN st
GROUP BY p.doc_id ORDER BY score DESC, p.doc_id LIMIT %(k)s"""


def analysed_words(text: str) -> str:
    """What to_tsvector reads of a text: its words (letters and digits, diacritics folded, as
    FTS5's unicode61 with remove_diacritics splits and folds them) joined by spaces, so the
    PostgreSQL parser's URL, path and e-mail tokens cannot swallow the words inside them."""
    folded = unicodedata.normalize("NFKD", text[:MAX_ANALYSED_CHARS])
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return " ".join(_WORD.findall(folded))


class VectorSearch:
    """Dense search in the database (pgvector, exact inner product): what `sync()` returns in
    place of the SQLite store's in-memory FAISS mirror."""

    def __init__(self, store: "PgRetrievalStore"):
        self.store = store

    def __len__(self) -> int:
        with self.store.read() as conn:
            row = conn.execute("SELECT n_docs FROM retrieval_stores WHERE id = %s",
                               (self.store.store_id,)).fetchone()
        return int(row[0]) if row else 0

    def search(self, query: np.ndarray, k: int) -> tuple[list[int], list[float]]:
        """Doc ids and inner products of the k nearest chunk vectors, best first (ties by id;
        a doc may repeat: `chunking.best_docs` keeps its best)."""
        if k <= 0:
            return [], []
        vector = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
        with self.store.read() as conn:
            rows = conn.execute(
                "SELECT doc_id, -(embedding <#> %(q)s) FROM retrieval_chunks WHERE store_id = %(s)s "
                "ORDER BY embedding <#> %(q)s, doc_id, chunk LIMIT %(k)s",
                {"q": vector, "s": self.store.store_id, "k": k}).fetchall()
        return [int(r[0]) for r in rows], [float(r[1]) for r in rows]


class PgRetrievalStore(outside.CatchUp, pg_database.PoolUser, MetaValues):
    """A project's store of one backend in a shared PostgreSQL database.

    The database is the only state: nothing is mirrored in memory, so another machine's writes
    are seen by the next call, and there is nothing to catch up on. Writes to one store take a
    transaction-level advisory lock, so they queue across processes and machines the way
    SQLite's BEGIN IMMEDIATE makes them queue on one file.
    """

    kind = "memory store"
    corrupt_hint = "fix or delete that row of retrieval_meta"

    def __init__(self, database: MemoryDatabase, backend: str, *, use_vectors: bool):
        self.database, self.backend, self.use_vectors = database, backend, use_vectors
        self.path = f"{database.where} [{backend}]"  # what messages name, as a file's path
        self.lock = threading.RLock()
        self.code_terms = True  # every PostgreSQL store indexes code terms (see bm25.fts_text)
        self._db: pg_database.Database | None = pg_database.acquire(database)
        try:
            with self.write(locked=False) as conn:
                self.store_id = pg_database.register_store(conn, database, backend)
            self._search = VectorSearch(self)
        except BaseException:
            self.close()
            raise

    # --- transactions ---------------------------------------------------------------------

    @contextmanager
    def _transaction(self, what: str, locked: bool) -> Iterator[Any]:
        import psycopg
        from psycopg_pool import PoolTimeout

        with self.lock:
            db = self._require_open()
            try:
                with db.connection() as conn:
                    if locked:
                        pg_database.lock_store_writes(conn, self.store_id)
                    yield conn
            except (psycopg.Error, PoolTimeout) as exc:
                raise pg_database.failure(self.database, exc, what) from None

    @contextmanager
    def write(self, locked: bool = True) -> Iterator[Any]:  # type: ignore[override]
        """One transaction, under the store's write lock; rolled back whole on any error. It
        first catches up on docs other programs wrote (outside.py), under the same lock."""
        with self._transaction("write failed in", locked) as conn:
            self._added: Counter[str] = Counter()  # the terms of the postings this write adds
            if locked:  # counted here: the trigger for other writers' postings skips them
                conn.execute("SELECT set_config(%s, 'on', true)", (pg_database.DF_COUNTED_SETTING,))
            if locked and conn.execute("SELECT EXISTS (SELECT 1 FROM retrieval_outside_writes "
                                       "WHERE store_id = %s)", (self.store_id,)).fetchone()[0]:
                self._catch_up(conn)
            yield conn
            if locked:
                self.fold_df(conn)

    def fold_df(self, conn: Any) -> None:
        """Add this transaction's postings' terms (`_added`) and the deltas of the postings it
        and other writers deleted, and other writers added, into retrieval_df, one row per
        term; a term no doc holds any more loses its row. Under the store's write lock: no other fold races it,
        and a delta another program commits meanwhile waits for the next one."""
        if self._added:
            terms = sorted(self._added)
            conn.execute("INSERT INTO retrieval_df AS df (store_id, term, n) SELECT %s, t, c "
                         "FROM unnest(%s::text[], %s::bigint[]) AS u (t, c) "
                         "ON CONFLICT (store_id, term) DO UPDATE SET n = df.n + EXCLUDED.n",
                         (self.store_id, terms, [self._added[t] for t in terms]))
            self._added.clear()
        gone = [r[0] for r in conn.execute(
            "WITH moved AS (DELETE FROM retrieval_df_delta WHERE store_id = %(s)s RETURNING term, d), "
            "summed AS (SELECT term, sum(d) AS d FROM moved GROUP BY term HAVING sum(d) != 0) "
            "INSERT INTO retrieval_df AS df (store_id, term, n) SELECT %(s)s, term, d FROM summed "
            "ORDER BY term ON CONFLICT (store_id, term) DO UPDATE SET n = df.n + EXCLUDED.n "
            "RETURNING term, n", {"s": self.store_id}) if r[1] <= 0]
        if gone:
            conn.execute("DELETE FROM retrieval_df WHERE store_id = %s AND term = ANY(%s)", (self.store_id, gone))

    @contextmanager
    def read(self) -> Iterator[Any]:  # type: ignore[override]
        with self._transaction("read failed in", False) as conn:
            yield conn

    # --- meta -------------------------------------------------------------------------------

    def meta(self, conn: Any, key: str) -> str | None:
        row = conn.execute("SELECT value FROM retrieval_meta WHERE store_id = %s AND key = %s",
                           (self.store_id, key)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, conn: Any, key: str, value: Any) -> None:
        conn.execute("INSERT INTO retrieval_meta VALUES (%s, %s, %s) ON CONFLICT (store_id, key) "
                     "DO UPDATE SET value = EXCLUDED.value",
                     (self.store_id, key, value if isinstance(value, str) else json.dumps(value)))

    def claim(self, conn: Any, key: str, value: str) -> None:
        conn.execute("INSERT INTO retrieval_meta VALUES (%s, %s, %s) "
                     "ON CONFLICT (store_id, key) DO NOTHING", (self.store_id, key, value))

    def holds_rows(self, conn: Any, table: str = "docs") -> bool:
        """Whether the store holds any doc (the embedder may change only while it holds none)."""
        return conn.execute("SELECT EXISTS (SELECT 1 FROM retrieval_docs WHERE store_id = %s)",
                            (self.store_id,)).fetchone()[0]

    def bump(self, conn: Any, ids: Sequence[int]) -> int:
        """Nothing to log: no instance mirrors the database (the SQLite store's change log).
        The store's counted writes are cut to the newest (the fingerprint reads only it)."""
        prune_writes(conn, "retrieval_doc_writes", "store_id = %s", (self.store_id,))
        return 0

    def sync(self) -> VectorSearch | None:
        self.catch_up()  # a doc rewritten by another program keeps its old vectors until then
        return self._search if self.use_vectors else None

    def save_snapshot(self) -> None:
        return None

    # --- row writes (inside write()) ---------------------------------------------------------

    def _params(self, record: MemoryRecord, now: float) -> dict[str, Any]:
        return {"store": self.store_id, "hash": doc_hash(record.text), "text": record.text,
                "now": now, "time": record.timestamp if record.timestamp is not None else now,
                "importance": record.importance or 3,
                "words": analysed_words(bm25.fts_text(record.text))}

    def insert(self, conn: Any, record: MemoryRecord, vectors: np.ndarray | None,
               now: float) -> int | None:
        """Add a doc with its chunk vectors; None when the exact text is already stored
        (another writer was first)."""
        row = conn.execute(INSERT, self._params(record, now)).fetchone()
        if row is None:
            return None
        self._added.update(row[1] or [])
        self._forget_own(conn, int(row[0]))
        if vectors is not None:
            self.put_chunks(conn, int(row[0]), vectors, new=True)
        return int(row[0])

    def put_chunks(self, conn: Any, doc_id: int, vectors: np.ndarray, new: bool = False) -> None:
        """A doc's chunk vectors, in place of any it had. A `new` doc has none to delete: the
        delete is skipped, as psycopg prepares a statement run 5 times with the plan of that
        moment, and one planned while the table was empty scans the whole table on every
        later run (a 100,000-doc import into a new store: every doc's delete scanned all the
        vectors before it, 57 s for the first 5,000 docs)."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, vectors.shape[-1])
        if not new:
            conn.execute("DELETE FROM retrieval_chunks WHERE doc_id = %s", (doc_id,))
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO retrieval_chunks (doc_id, chunk, store_id, embedding) "
                            "VALUES (%s, %s, %s, %s)",
                            [(doc_id, n, self.store_id, v) for n, v in enumerate(vectors)])

    def replace(self, conn: Any, doc_id: int, record: MemoryRecord, vectors: np.ndarray | None,
                now: float) -> bool:
        """Update a doc in place with a newer near-duplicate (see RetrievalStore.replace)."""
        conn.execute("DELETE FROM retrieval_postings WHERE doc_id = %s AND store_id = %s",
                     (doc_id, self.store_id))
        row = conn.execute(REPLACE, {**self._params(record, now), "id": doc_id}).fetchone()
        if row is None:
            return False
        self._added.update(row[1] or [])
        self._forget_own(conn, doc_id)
        if vectors is not None:
            self.put_chunks(conn, doc_id, vectors)
        return True

    def remove(self, conn: Any, doc_id: int) -> None:
        conn.execute(
            "WITH doc AS (DELETE FROM retrieval_docs WHERE id = %(id)s AND store_id = %(s)s "
            "RETURNING doc_len) UPDATE retrieval_stores SET n_docs = n_docs - 1, "
            "total_len = total_len - doc.doc_len FROM doc WHERE retrieval_stores.id = %(s)s",
            {"id": doc_id, "s": self.store_id})
        self._forget_own(conn, doc_id)

    # --- queries -----------------------------------------------------------------------------

    def rows(self, ids: Sequence[int]) -> dict[int, DocRow]:
        with self.read() as conn:
            found = conn.execute(
                "SELECT id, text, doc_time, importance FROM retrieval_docs "
                "WHERE store_id = %s AND id = ANY(%s)", (self.store_id, list(ids))).fetchall()
        return {int(r[0]): DocRow(int(r[0]), r[1], float(r[2]), int(r[3])) for r in found}

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Each doc's chunk vectors (n_chunks, d)."""
        with self.read() as conn:
            found = conn.execute("SELECT doc_id, embedding FROM retrieval_chunks "
                                 "WHERE store_id = %s AND doc_id = ANY(%s) ORDER BY doc_id, chunk",
                                 (self.store_id, list(ids))).fetchall()
        by_doc: dict[int, list[np.ndarray]] = {}
        for i, v in found:  # pgvector-python >= 0.5 loads a `Vector`; older releases an array
            by_doc.setdefault(int(i), []).append(
                np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32))
        return {i: np.vstack(rows) for i, rows in by_doc.items()}

    def ids_by_text(self, conn: Any, texts: Sequence[str]) -> dict[str, int]:
        hashes = {doc_hash(t): t for t in texts}
        found = conn.execute("SELECT hash, id FROM retrieval_docs WHERE store_id = %s "
                             "AND hash = ANY(%s)", (self.store_id, list(hashes))).fetchall()
        return {hashes[h]: int(i) for h, i in found}

    def doc_texts(self, conn: Any) -> dict[int, str]:
        """Every doc's text by id (inside a transaction)."""
        return {int(i): t for i, t in conn.execute(
            "SELECT id, text FROM retrieval_docs WHERE store_id = %s", (self.store_id,))}

    # --- docs other programs wrote (see outside.py) ------------------------------------------

    def _pending(self) -> tuple[bool, bool]:
        with self.read() as conn:
            logged, waiting = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM retrieval_outside_writes WHERE store_id = %(s)s), "
                "EXISTS (SELECT 1 FROM retrieval_needs_vectors WHERE store_id = %(s)s)",
                {"s": self.store_id}).fetchone()
        return bool(logged), bool(waiting)

    def _catch_up(self, conn: Any) -> None:
        """Inside a write: each logged doc's postings, length and hash from its text now, its old
        vectors dropped and new ones asked for; the store's totals counted again. A doc rewritten
        to another doc's text is removed (a text is stored once)."""
        logged = {int(r[0]) for r in conn.execute(
            "DELETE FROM retrieval_outside_writes WHERE store_id = %s RETURNING doc_id", (self.store_id,))}
        for doc_id in sorted(logged):
            conn.execute("DELETE FROM retrieval_postings WHERE doc_id = %s", (doc_id,))
            conn.execute("DELETE FROM retrieval_chunks WHERE doc_id = %s", (doc_id,))
            conn.execute("DELETE FROM retrieval_vectors WHERE id = %s", (doc_id,))
            row = conn.execute("SELECT text FROM retrieval_docs WHERE id = %s AND store_id = %s",
                               (doc_id, self.store_id)).fetchone()
            if row is None:
                continue
            text, new_hash = row[0], doc_hash(row[0])
            twin = conn.execute("SELECT 1 FROM retrieval_docs WHERE store_id = %s AND hash = %s AND id != %s",
                                (self.store_id, new_hash, doc_id)).fetchone()
            if twin is not None:
                conn.execute("DELETE FROM retrieval_docs WHERE id = %s", (doc_id,))
                continue
            reposted = conn.execute(REPOST, {"store": self.store_id, "id": doc_id, "hash": new_hash,
                                             "words": analysed_words(bm25.fts_text(text))})
            self._added.update(r[0] for r in reposted)
            if self.use_vectors:
                conn.execute("INSERT INTO retrieval_needs_vectors VALUES (%s, %s) ON CONFLICT DO NOTHING",
                             (doc_id, self.store_id))
        conn.execute("UPDATE retrieval_stores SET (n_docs, total_len) = (SELECT count(*), coalesce(sum(doc_len), 0) "
                     "FROM retrieval_docs WHERE store_id = %(s)s) WHERE id = %(s)s", {"s": self.store_id})
        # this catch-up's own writes (the hash, a twin's delete) were logged too: they are handled
        conn.execute("DELETE FROM retrieval_outside_writes WHERE store_id = %s AND doc_id = ANY(%s)",
                     (self.store_id, sorted(logged)))

    def _forget_own(self, conn: Any, doc_id: int) -> None:
        conn.execute("DELETE FROM retrieval_outside_writes WHERE store_id = %s AND doc_id = %s",
                     (self.store_id, doc_id))

    def wanting_vectors(self) -> dict[int, str]:
        """Docs rewritten by another program whose vectors are to be made again, by id."""
        with self.read() as conn:
            return {int(i): t for i, t in conn.execute(
                "SELECT d.id, d.text FROM retrieval_needs_vectors n JOIN retrieval_docs d ON d.id = n.doc_id "
                "WHERE n.store_id = %s", (self.store_id,))}

    def put_made_vectors(self, made: dict[int, tuple[str, np.ndarray]]) -> None:
        """Store vectors made for `wanting_vectors()` docs whose text is still the one embedded."""
        with self.write() as conn:
            for doc_id, (text, vectors) in made.items():
                row = conn.execute("SELECT text FROM retrieval_docs WHERE id = %s AND store_id = %s",
                                   (doc_id, self.store_id)).fetchone()
                if row is not None and row[0] == text:
                    self.put_chunks(conn, doc_id, vectors)
                    conn.execute("DELETE FROM retrieval_needs_vectors WHERE doc_id = %s", (doc_id,))

    def bm25(self, query: str, k: int) -> list[tuple[int, float]]:
        self.catch_up()
        words = self.bm25_words(query)
        if not words or k <= 0:
            return []
        with self.read() as conn:
            rows = conn.execute(BM25, {"words": words, "store": self.store_id, "k": k}).fetchall()
        return [(int(i), float(s)) for i, s in rows]

    def bm25_words(self, query: str) -> str:
        """The words of a query BM25 looks up (to_tsvector's input; '' when none)."""
        terms = bm25.query_terms(query, self.code_terms)
        if self.code_terms:
            # FTS5 searches a word joined by '_' as a phrase, which postings cannot; its code
            # term (the identifier joined into one word, indexed with every doc naming it)
            # finds the same docs, so the phrase's parts are not searched one by one.
            joined = set(bm25.code_terms(query))
            terms = [t for t in terms if "_" not in t or _JOINED.sub("", t) not in joined]
        return analysed_words(" ".join(terms))

    def recent(self, n: int) -> list[int]:
        with self.read() as conn:
            return [int(r[0]) for r in conn.execute(
                "SELECT id FROM retrieval_docs WHERE store_id = %s "
                "ORDER BY doc_time DESC, id DESC LIMIT %s", (self.store_id, n))]

    def containing(self, needle: str, limit: int) -> list[tuple[int, str]]:
        """As RetrievalStore.containing: the newest `limit` docs whose text contains `needle`."""
        with self.read() as conn:
            return [(int(i), text) for i, text in conn.execute(
                "SELECT id, text FROM retrieval_docs WHERE store_id = %s AND strpos(text, %s) > 0 "
                "ORDER BY doc_time DESC, id DESC LIMIT %s", (self.store_id, needle, limit))]

    def around(self, ids: Sequence[int], reach: int) -> dict[int, list[tuple[int, int, str]]]:
        """As RetrievalStore.around: the `reach` docs either side of each id in time order."""
        out: dict[int, list[tuple[int, int, str]]] = {}
        with self.read() as conn:
            for doc_id in ids:
                row = conn.execute("SELECT doc_time FROM retrieval_docs WHERE store_id = %s "
                                   "AND id = %s", (self.store_id, doc_id)).fetchone()
                if row is None:
                    continue
                key = (self.store_id, row[0], doc_id, reach)
                before = conn.execute(
                    "SELECT id, text FROM retrieval_docs WHERE store_id = %s AND (doc_time, id) < "
                    "(%s, %s) ORDER BY doc_time DESC, id DESC LIMIT %s", key).fetchall()
                after = conn.execute(
                    "SELECT id, text FROM retrieval_docs WHERE store_id = %s AND (doc_time, id) > "
                    "(%s, %s) ORDER BY doc_time, id LIMIT %s", key).fetchall()
                out[doc_id] = [(int(i), n, text) for part in (before, after)
                               for n, (i, text) in enumerate(part, start=1)]
        return out

    def texts(self) -> list[str]:
        with self.read() as conn:
            return [r[0] for r in conn.execute(
                "SELECT text FROM retrieval_docs WHERE store_id = %s ORDER BY id", (self.store_id,))]

    def texts_by_hash_prefix(self, prefix: str) -> list[str]:
        """The docs whose hash starts with `prefix`: a range of the (store_id, hash) index."""
        low, high = hash_range(prefix)
        with self.read() as conn:
            return [r[0] for r in conn.execute(
                "SELECT text, hash FROM retrieval_docs WHERE store_id = %s AND hash >= %s AND "
                "hash <= %s ORDER BY id", (self.store_id, low, high)) if str(r[1]).startswith(prefix)]

    def texts_by_hash_prefixes(self, prefixes: Sequence[str]) -> list[str]:
        """The docs whose hash starts with any of `prefixes`, each once, oldest first: one
        query reading a range of the (store_id, hash) index per prefix (a BitmapOr of them).
        The ranges are ORed constants, planned each time (never prepared): a join with an
        array of ranges, or a generic plan, cannot see how narrow each range is, and scanned
        the store's docs (0.17 s a block at 50,000 docs, where a query per doc took 0.014 s)."""
        prefixes = list(dict.fromkeys(prefixes))
        if not prefixes:
            return []
        ranges = " OR ".join(["(hash >= %s AND hash <= %s)"] * len(prefixes))
        with self.read() as conn:
            found = conn.execute(
                f"SELECT text, hash FROM retrieval_docs WHERE store_id = %s AND ({ranges}) ORDER BY id",
                [self.store_id, *(bound for prefix in prefixes for bound in hash_range(prefix))],
                prepare=False).fetchall()
        return [text for text, hashed in found if str(hashed).startswith(tuple(prefixes))]

    def count(self) -> int:
        with self.read() as conn:
            return int(conn.execute("SELECT count(*) FROM retrieval_docs WHERE store_id = %s",
                                    (self.store_id,)).fetchone()[0])

    def doc_time(self, text: str) -> float | None:
        """The time the doc is dated by, found by its hash (the (store_id, hash) key), or None."""
        with self.read() as conn:
            row = conn.execute("SELECT text, doc_time FROM retrieval_docs WHERE store_id = %s AND hash = %s",
                               (self.store_id, doc_hash(text))).fetchone()
        return float(row[1]) if row is not None and row[0] == text else None

    def fingerprint(self) -> str:
        """How many docs, the newest id given (a sequence: never given twice) and how many
        writes of the docs' text or time the database counted (the newest of the store's
        retrieval_doc_writes, added by a trigger: a doc rewritten in place by any tool moves
        it too); a recall's access counts do not."""
        with self.read() as conn:
            count, newest = conn.execute("SELECT count(*), COALESCE(MAX(id), 0) FROM retrieval_docs"
                                         " WHERE store_id = %s", (self.store_id,)).fetchone()
            writes = conn.execute("SELECT COALESCE(MAX(n), 0) FROM retrieval_doc_writes WHERE store_id = %s",
                                  (self.store_id,)).fetchone()[0]
        return f"{count}:{newest}:{writes}"

    def touch(self, ids: Sequence[int], now: float) -> None:
        """Access count and last-accessed time, under the write lock (ordered rows)."""
        if not ids:
            return
        with self.write() as conn:
            # Counts, not content: no wait for the WAL flush on every retrieve (a crash may
            # lose the last few counts, never a doc).
            conn.execute("SET LOCAL synchronous_commit = off")
            conn.execute("UPDATE retrieval_docs SET access_count = access_count + 1, "
                         "last_accessed = %s WHERE store_id = %s AND id = ANY(%s)",
                         (now, self.store_id, sorted(ids)))

    def stats(self) -> list[dict[str, Any]]:
        keys = ("id", "text", "created_at", "doc_time", "importance", "access_count",
                "last_accessed")
        with self.read() as conn:
            rows = conn.execute(f"SELECT {', '.join(keys)} FROM retrieval_docs "
                                "WHERE store_id = %s ORDER BY id", (self.store_id,)).fetchall()
        return [dict(zip(keys, r)) for r in rows]
