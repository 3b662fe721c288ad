"""RetrievalBackend: the memory API over a RetrievalStore; dense, bm25 and hybrid only rank apart."""

from __future__ import annotations

import logging
import math
from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from backends.common import QueryVectors, SharesDatabase, bind_embedder, claim_backend, coerce_options
from backends.storage import salvage_rows
from orchestrator.plugin_api import (
    BackendOptions,
    MemoryBackend,
    MemoryDatabase,
    MemoryStoreError,
    RetrieveResult,
    TextLLM,
    check_texts,
)

from . import bm25 as bm25_module
from . import chunking
from .cache import EmbeddingCache, embed_documents, shared_cache
from .embedders import Embedder
from .store import MemoryRecord, RetrievalStore
from .supersession import Memory, marks, reorder

log = logging.getLogger("middle.retrieval")


EXPLAIN_POOL = 1000  # BM25 matches `explain` reads a doc's score from (beyond: shown as 0.0)


class RetrievalBackend(SharesDatabase, MemoryBackend):
    """Shared plumbing; subclasses set `uses_vectors` and implement `_rank`.

    Besides the three required methods it offers `index_records` (docs with an event time and
    an importance), which `middle bench memory` and the pipeline's recency stage use.
    """

    uses_vectors: ClassVar[bool] = True
    # Whether `_rank` reads BM25 (bm25, hybrid): `explain` then gives each doc's BM25 score.
    ranks_keywords: ClassVar[bool] = True
    # A later memory amending an earlier one ranks above it (supersession.py); the earlier one
    # is kept and marked. Off for bm25: it is the plain keyword baseline.
    supersedes: ClassVar[bool] = False
    SUPERSESSION_POOL: ClassVar[int] = 3  # candidates per result an amendment may come from
    keeps_times: ClassVar[bool] = True  # index_records stores each record's event time
    # What of a doc its vectors read (chunking.TEXT or PROSE): the whole text, unless a lexical
    # half beside them matches the file paths (hybrid), when its prose is enough.
    embed_view: ClassVar[str] = chunking.TEXT

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if isinstance(cls.__dict__.get("name"), str):  # one SQLite file named after the backend
            cls.store_files = (f"{cls.name}.sqlite3",)

    def __init__(self, store_dir: Path, options: BackendOptions | dict[str, Any] | None = None,
                 llm: TextLLM | None = None, *, database: MemoryDatabase | None = None):
        super().__init__(store_dir, coerce_options(type(self), options), llm)
        self.database = database
        self._store: Any
        if database is not None:  # PostgreSQL: pgvector + BM25 postings, shared by machines
            from .pg_store import PgRetrievalStore

            self._store = PgRetrievalStore(database, self.name, use_vectors=self.uses_vectors)
        else:
            self._store = RetrievalStore(self.store_dir / f"{self.name}.sqlite3",
                                         use_vectors=self.uses_vectors)
        try:
            claim_backend(self._store, self.name)
            self.embedder: Embedder | None = (
                bind_embedder(self._store, self.options, self.name, "docs")
                if self.uses_vectors else None)
            # Not refused here: `middle memory reindex` opens an old store to read its docs.
            self._stale = (chunking.claim_chunking(self._store, self.embedder, self.name, view=self.embed_view)
                           if self.embedder is not None else None)
        except BaseException:
            self._store.close()
            raise
        self._query_vector = QueryVectors(self.embedder)
        cache_on = self.uses_vectors and getattr(self.options, "embedding_cache", False)
        self._cache: EmbeddingCache | None = shared_cache() if cache_on else None

    @classmethod
    def salvage_records(cls, store_dir: Path) -> list[tuple[str, float | None]]:
        return salvage_rows(Path(store_dir) / f"{cls.name}.sqlite3", "docs", ("text", "doc_time"))

    # --- the memory API ------------------------------------------------------------------

    def index(self, docs: list[str]) -> None:
        self.index_records([MemoryRecord(d) for d in check_texts(docs, "docs")])

    def index_records(self, records: Sequence[MemoryRecord]) -> None:
        """Add docs with optional event time (unix seconds) and importance (1-5); exact
        duplicates are skipped. All or nothing: a failure leaves the store as it was."""
        self._index(records, {})

    def embed_ahead(self, docs: Sequence[str]) -> dict[str, np.ndarray]:
        """Each doc's chunk vectors, made without touching the store (the facade calls this
        outside the project's locks); none from a store that must be reindexed first."""
        if self.embedder is None or self._stale is not None:
            return {}
        texts = list(dict.fromkeys(check_texts(list(docs), "docs")))
        return dict(zip(texts, self._embed(texts) or []))

    def index_embedded(self, docs: list[str], embedded: Mapping[str, Any]) -> None:
        self._index([MemoryRecord(d) for d in check_texts(docs, "docs")], embedded)

    def _index(self, records: Sequence[MemoryRecord], embedded: Mapping[str, Any]) -> None:
        """index_records, with the vectors of `embedded` (text -> chunk vectors) where given."""
        records = _check_records(records)
        self._refuse_stale()
        with self._store.lock:
            with self._store.read() as conn:
                present = self._store.ids_by_text(conn, [r.text for r in records])
            first: dict[str, MemoryRecord] = {}
            for record in records:  # the first occurrence of a text wins, in the order given
                if record.text not in present:
                    first.setdefault(record.text, record)
            fresh = list(first.values())
            if not fresh:
                return
            # Only what was not embedded ahead (may fail: nothing written yet).
            late = [r.text for r in fresh if r.text not in embedded]
            made = dict(zip(late, self._embed(late) or [])) if late else {}
            vectors = None if self.embedder is None else [
                embedded[r.text] if r.text in embedded else made[r.text] for r in fresh]
            self._write(fresh, vectors)

    def _refuse_stale(self) -> None:
        """A store whose vectors were made another way answers nothing until it is reindexed."""
        if self._stale is not None and self.embedder is not None:
            # Asked again: another process (another machine, on PostgreSQL) may have migrated it.
            self._stale = chunking.claim_chunking(self._store, self.embedder, self.name, view=self.embed_view)
            if self._stale is not None:
                raise MemoryStoreError(self._stale)

    def _embed(self, texts: list[str]) -> list[np.ndarray] | None:
        """Per text, its chunk vectors (n_chunks, d): the document whole (see chunking)."""
        if self.embedder is None:
            return None
        embedder = self.embedder
        return chunking.embed_chunked(embedder, texts,
                                      lambda chunks: embed_documents(embedder, chunks, self._cache),
                                      self.embed_view)

    def _write(self, records: list[MemoryRecord], vectors: list[np.ndarray] | None) -> None:
        now = self.clock()
        with self._store.write() as conn:
            touched = []
            for i, record in enumerate(records):
                doc_id = self._store.insert(conn, record, None if vectors is None else vectors[i], now)
                if doc_id is not None:
                    touched.append(doc_id)
            if touched:
                self._store.bump(conn, touched)

    def reembed(self) -> int:
        """Embed every doc again, whole, in one write transaction (writers wait for it), and
        record the chunking: how `middle memory reindex` migrates a store that cannot be
        rebuilt file by file (PostgreSQL). Returns how many docs were embedded."""
        if self.embedder is None:
            return 0
        texts = {row["id"]: row["text"] for row in self._store.stats()}
        embedded = dict(zip(texts, self._embed(list(texts.values())) or []))  # before the lock
        with self._store.write() as conn:
            docs = self._store.doc_texts(conn)  # as of now: another writer may have been first
            late = [i for i in docs if texts.get(i) != docs[i]]
            embedded.update(zip(late, self._embed([docs[i] for i in late]) or []))
            for doc_id in docs:
                self._store.put_chunks(conn, doc_id, embedded[doc_id])
            self._store.set_meta(conn, "chunking", chunking.scheme(self.embedder, self.embed_view))
            if docs:
                self._store.bump(conn, list(docs))
        self._stale = None
        return len(docs)

    def explain(self, query: str, docs: Sequence[str]) -> list[dict[str, Any]]:
        """Each doc's date, its BM25 score for the query when the backend ranks by keywords
        (0.0: it shares no query word, so it came by another signal: its vector, or people's
        supersede link) and, with vectors, its best chunk's cosine to the query (as the dense
        half ranked it: the query's prose when the vectors read prose)."""
        with self._store.lock:
            keyword_scores = dict(self._store.bm25(query, EXPLAIN_POOL)) if self.ranks_keywords else {}
            with self._store.read() as conn:
                ids = self._store.ids_by_text(conn, list(docs))
            rows = self._store.rows(list(ids.values()))
            vectors = self._store.vectors(list(ids.values())) if self.embedder is not None else {}
            q = None
            if vectors:
                text = bm25_module.without_paths(query) if self.embed_view == chunking.PROSE else query
                q = self._query_vector(text)
        out: list[dict[str, Any]] = []
        for doc in docs:
            signals: dict[str, Any] = {}
            i = ids.get(doc)
            if i is not None and i in rows:
                signals["date"] = rows[i].doc_time
            if q is not None and i in vectors:
                signals["similarity"] = float(np.max(vectors[i] @ q))
            if self.ranks_keywords and i is not None:
                signals["bm25"] = float(keyword_scores.get(i, 0.0))
            out.append(signals)
        return out

    def embeds_docs(self) -> bool:
        return self.embedder is not None  # bm25 embeds nothing

    def warm_embeddings(self, docs: Sequence[str]) -> None:
        """Embed docs into the cache without storing them (benchmarks time the two apart)."""
        if self.embedder is not None and self._cache is not None and self.embedder.cacheable:
            self._embed(list(docs))

    def retrieve(self, queries: list[str], num_to_retrieve: int) -> list[RetrieveResult]:
        queries = check_texts(queries, "queries")
        self._refuse_stale()
        results: list[RetrieveResult] = []
        returned: list[int] = []
        with self._store.caught_up():  # once for the whole search (each read would check again)
            self._revectorise()
            self._retrieve(queries, num_to_retrieve, results, returned)
        return results

    def _retrieve(self, queries: list[str], num_to_retrieve: int, results: list[RetrieveResult],
                  returned: list[int]) -> None:
        with self._store.lock:
            self._store.sync()
            for query in queries:
                ranked = self._rank(query, num_to_retrieve) if num_to_retrieve > 0 else []
                pairs: dict[int, int] = {}
                if self.supersedes and ranked:
                    ranked, pairs = self._supersede(query, ranked, num_to_retrieve)
                rows = self._store.rows([i for i, _ in ranked])
                ranked = [(i, s) for i, s in ranked if i in rows]
                returned.extend(i for i, _ in ranked)
                result: RetrieveResult = {"question": query,
                                          "docs": [rows[i].text for i, _ in ranked],
                                          "doc_scores": [float(s) for _, s in ranked]}
                if pairs:
                    result["superseded"] = marks([i for i, _ in ranked], pairs,
                                                 {i: r.doc_time for i, r in rows.items()})
                results.append(result)
            if returned and getattr(self.options, "track_access", False):
                self._store.touch(sorted(set(returned)), self.clock())

    def _revectorise(self) -> None:
        """Make the vectors of docs another program rewrote (the store dropped their old ones
        when it caught up: see outside.py), before a search reads the vectors."""
        if self.embedder is None or not self._store.vectors_wanted():
            return
        wanted = self._store.wanting_vectors()
        if wanted:
            made = self._embed(list(wanted.values())) or []
            self._store.put_made_vectors({i: (t, v) for (i, t), v in zip(wanted.items(), made)})

    def _supersede(self, query: str, ranked: list[tuple[int, float]],
                   k: int) -> tuple[list[tuple[int, float]], dict[int, int]]:
        """The top k with amendments from a wider pool placed right above what they amend."""
        held = {i for i, _ in ranked}
        wider = [(i, s) for i, s in self._rank(query, self.SUPERSESSION_POOL * k) if i not in held]
        candidates = ranked + wider
        rows = self._store.rows([i for i, _ in candidates])
        pool = [Memory(i, rows[i].text, rows[i].doc_time) for i, _ in candidates if i in rows]
        return reorder(candidates, k, pool)

    @abstractmethod
    def _rank(self, query: str, k: int) -> list[tuple[int, float]]:
        """(doc id, score) of the best k docs, best first."""

    def _dense(self, query: str, k: int) -> list[tuple[int, float]]:
        index = self._store.sync()
        if index is None or len(index) == 0 or self.embedder is None:
            return []
        return chunking.best_docs(index.search, self._query_vector(query), k)

    def delete(self, docs: list[str]) -> int:
        docs = check_texts(docs, "docs")
        with self._store.write() as conn:
            ids = self._store.ids_by_text(conn, list(dict.fromkeys(docs)))
            for doc_id in ids.values():
                self._store.remove(conn, doc_id)
            if ids:
                self._store.bump(conn, list(ids.values()))
        return len(ids)

    def list_docs(self) -> list[str]:
        self._store.catch_up()  # a doc rewritten to another's text is listed once
        return self._store.texts()

    def list_records(self) -> list[tuple[str, float]]:
        """Every doc with its event time, oldest first (`middle memory reindex` keeps times)."""
        return [(row["text"], row["doc_time"]) for row in self._store.stats()]

    def docs_by_id(self, prefix: str) -> list[str]:
        self._store.catch_up()  # a doc another program rewrote is found by its new text's id
        return self._store.texts_by_hash_prefix(prefix)

    def docs_by_ids(self, prefixes: list[str]) -> list[str]:
        self._store.catch_up()
        return self._store.texts_by_hash_prefixes(prefixes)

    def catch_up(self) -> None:  # MemoryBackend.catch_up: docs other programs wrote (outside.py)
        self._store.catch_up()

    def fingerprint(self) -> str | None:
        return self._store.fingerprint()

    def doc_time(self, doc: str) -> float | None:
        self._store.catch_up()
        return self._store.doc_time(doc)

    def has_doc(self, doc: str) -> bool:
        self._store.catch_up()
        with self._store.read() as conn:
            return bool(self._store.ids_by_text(conn, [doc]))

    def stats(self) -> list[dict[str, Any]]:
        """Per-doc metadata (times, importance, access count), oldest first."""
        return self._store.stats()

    def close(self) -> None:
        if self._store.closed:
            return
        if self._stale is not None:  # its old vectors are not worth a snapshot
            self._store.close()
            return
        try:
            self._store.save_snapshot()
        except Exception as exc:  # a snapshot only speeds up the next open
            log.warning("Could not save the vector snapshot of %s: %s", self._store.path, exc)
        self._store.close()


def _check_records(records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    if isinstance(records, (str, bytes)) or not isinstance(records, (list, tuple)):
        raise TypeError(f"index_records takes a list of MemoryRecord, not {type(records).__name__}")
    if not all(isinstance(r, MemoryRecord) for r in records):
        raise TypeError("index_records takes MemoryRecord items")
    check_texts([r.text for r in records], "docs")
    checked = []
    for r in records:
        if r.timestamp is not None and not (isinstance(r.timestamp, (int, float))
                                            and math.isfinite(r.timestamp)):
            raise ValueError(f"timestamp must be finite unix seconds, got {r.timestamp!r}")
        if r.importance is not None and not (isinstance(r.importance, int) and 1 <= r.importance <= 5):
            raise ValueError(f"importance must be an int from 1 to 5, got {r.importance!r}")
        checked.append(r)
    return checked
