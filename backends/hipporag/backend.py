"""HippoRAGBackend: OpenIE graph memory ranked by Personalized PageRank (HippoRAG 2, minimal)."""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from backends import retrieval
from backends.common import (
    DocumentListing,
    DocumentTable,
    QueryVectors,
    SharesDatabase,
    bind_embedder,
    claim_backend,
    claim_vector_kind,
    coerce_options,
)
from backends.rederive import CatchesUp, DocumentTableRebuild
from backends.storage import CHUNK, salvage_rows, warn_outside_writes
from orchestrator.plugin_api import (
    BackendOptions,
    ConfigError,
    MemoryBackend,
    MemoryDatabase,
    MemoryStoreError,
    RetrieveResult,
    TextLLM,
    check_texts,
)

from . import openie
from .graph import Graph, GraphMirror, personalized_pagerank
from .options import HippoRAGOptions
from .readings import Reading, read, read_many
from .store import VECTOR_TABLES, open_graph_store, text_hash
from .writer import GraphWriter, NewPassage, alnum_count, composed, fact_text

log = logging.getLogger("middle.memory.hipporag")

POOL = 3  # candidates per result for the recency blend (hybrid's candidate_multiplier)
MAX_QUERY_CHARS = 2000  # entities are looked for in a query's head (per-turn queries are ~1000)
# What changes the graph's shape: a store keeps the values it was built with.
GRAPH_SPEC_KEYS = ("synonymy_threshold", "synonymy_max_neighbours", "synonymy_min_chars")


class HippoRAGBackend(SharesDatabase, CatchesUp, DocumentListing, DocumentTableRebuild, MemoryBackend):
    """Passages and entity phrases in one graph; queries seed PageRank through matching facts."""

    name = "hipporag"
    description = ("HippoRAG 2 minimal: OpenIE knowledge graph (offline extractor, the memory "
                   "LLM or precomputed triples) ranked by Personalized PageRank.")
    Options = HippoRAGOptions
    store_files = ("hipporag.sqlite3",)

    @classmethod
    def salvage_records(cls, store_dir: Path) -> list[tuple[str, float | None]]:
        return salvage_rows(Path(store_dir) / "hipporag.sqlite3", "passages", ("text", "created_at"))
    keeps_times = True  # a passage's time is what recency counts from

    def __init__(self, store_dir: Path, options: BackendOptions | dict[str, Any] | None = None,
                 llm: TextLLM | None = None, *, database: MemoryDatabase | None = None):
        super().__init__(store_dir, coerce_options(type(self), options), llm)
        opts: HippoRAGOptions = self.options  # type: ignore[assignment]
        self.source, self.precomputed = self._openie_source(opts)
        self.database = database
        self._store = open_graph_store(self.store_dir, database)
        self._doc_table = DocumentTable(self._store.read, "passages", "created_at", "hash", text_hash)
        # What the last ranking's supersession found (see _supersede), for retrieve's marks.
        self._pairs: dict[int, int] = {}
        self._times: dict[int, float] = {}
        try:
            claim_backend(self._store, self.name)
            warn_outside_writes(self._store, self.name, "graph (entities, facts and links)", log)
            self._claim(opts)
            self.embedder = bind_embedder(self._store, opts, self.name, "passages")
            # Not refused here: `middle memory reindex` opens an old store to read its docs.
            self._stale = retrieval.chunking.claim_chunking(self._store, self.embedder,
                                                            self.name, "passages")
        except BaseException:
            self._store.close()
            raise
        self._cache = retrieval.shared_cache() if opts.embedding_cache else None
        self._passages = retrieval.ChunkMatrixMirror(VECTOR_TABLES["p"], "p")
        self._facts = retrieval.MatrixMirror(VECTOR_TABLES["f"], "f")
        self._entities = retrieval.IndexMirror(VECTOR_TABLES["e"], "e")
        self._graph = GraphMirror()
        self._query_vector = QueryVectors(self.embedder)

    @classmethod
    def _coerce(cls, options: BackendOptions | dict[str, Any] | None) -> BackendOptions:
        return coerce_options(cls, options)

    def _openie_source(self, opts: HippoRAGOptions):
        if opts.openie.startswith("precomputed:"):
            return "precomputed", openie.load_precomputed(opts.openie)
        if opts.openie == "llm" and self.llm is None:
            raise ConfigError("hipporag option openie = \"llm\" needs a memory model: configure "
                              "one, or use openie = \"auto\" (offline without a model)")
        if opts.openie in ("llm", "auto") and self.llm is not None:
            return "llm", None
        return "offline", None

    def _claim(self, opts: HippoRAGOptions) -> None:
        spec = json.dumps({k: getattr(opts, k) for k in GRAPH_SPEC_KEYS}, sort_keys=True)
        held = self._store.claim_meta({"graph_spec": spec})
        if held["graph_spec"] != spec:
            raise ConfigError(f"the hipporag store {self._store.path} was built with synonymy "
                              f"options {held['graph_spec']}, but [memory.options] asks for {spec}: "
                              "use the store's values, or run `middle memory reindex --from "
                              "hipporag` to rebuild it with the new ones")
        self.fact_vectors = claim_vector_kind(self._store, opts.fact_vectors, "fact_vectors",
                                              self.name)

    # --- embedding ------------------------------------------------------------------------

    def _embed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        texts = list(dict.fromkeys(texts))
        if not texts:
            return {}
        vectors = retrieval.embed_documents(self.embedder, texts, self._cache)
        return dict(zip(texts, vectors))

    def embeds_docs(self) -> bool:
        return True

    def warm_embeddings(self, docs: Sequence[str]) -> None:
        """Embed passages (or read them, with fact_vectors = "passage") into the cache without
        storing them: benchmarks time the model and the graph apart."""
        if self._cache is None:
            return
        texts = list(dict.fromkeys(docs))
        if self.fact_vectors == "passage" and self.embedder.token_states("") is not None:
            extractions = self._extract(texts)
            read_many(self.embedder, [(text, extractions[text]) for text in texts], self._cache)
            texts = [t for t in texts if len(retrieval.chunking.chunks(self.embedder, t)) > 1]
        self._chunk_vectors(texts)

    def _chunk_vectors(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Each passage's chunk vectors (n_chunks, d): the passage whole (see chunking)."""
        embedder = self.embedder
        return dict(zip(texts, retrieval.chunking.embed_chunked(
            embedder, texts, lambda chunks: retrieval.embed_documents(embedder, chunks, self._cache))))

    def catch_up(self) -> None:
        """The facade's catch-up before each call: an old store's hint (`middle memory reindex`)
        comes first, as a catch-up would write into a store whose passages cannot be read."""
        self._refuse_stale()
        super().catch_up()

    def _refuse_stale(self) -> None:
        """A store whose passage vectors were made another way answers nothing until reindexed."""
        if self._stale is not None:  # asked again: another process may have rebuilt it
            self._stale = retrieval.chunking.claim_chunking(self._store, self.embedder,
                                                            self.name, "passages")
            if self._stale is not None:
                raise MemoryStoreError(self._stale)

    # --- index ----------------------------------------------------------------------------

    def index(self, docs: list[str]) -> None:
        docs = check_texts(docs, "docs")
        self._refuse_stale()  # an old store's hint first: a catch-up would write into it
        self._catch_up()
        self._add(docs, {})

    def _add(self, docs: list[str], when: dict[str, float | None]) -> None:
        opts: HippoRAGOptions = self.options  # type: ignore[assignment]
        self._refuse_stale()
        with self._store.lock:
            fresh = self._unknown(docs)
            if not fresh:
                return
            extractions = self._extract(fresh)
            entities = {n for ex in extractions.values() for n in ex.entities
                        if opts.synonymy_max_neighbours > 0 and alnum_count(n) >= opts.synonymy_min_chars}
            triples = {t for ex in extractions.values() for t in ex.triples}
            readings = self._read(fresh, extractions)
            # A passage that fits one window has its reading's vector as its one chunk (the
            # same vector: see readings); a longer one is embedded chunk by chunk.
            passages = {t: r.vector[None, :] for t, r in readings.items() if r is not None
                        and len(retrieval.chunking.chunks(self.embedder, t)) == 1}
            passages.update(self._chunk_vectors([t for t in fresh if t not in passages]))
            names, facts = self._missing(entities, triples)
            known = self._embed(self._unread(fresh, extractions, readings, names, facts))
            items = [NewPassage(text, text_hash(text), passages[text], extractions[text],
                                when.get(text), readings.get(text)) for text in fresh]
            self._write(lambda w: w.add(items, known))

    def _read(self, texts: list[str], extractions: dict[str, openie.Extraction]
              ) -> dict[str, Reading | None]:
        """With fact_vectors = "passage", each passage read once (see readings)."""
        if self.fact_vectors != "passage":
            return {}
        return dict(zip(texts, read_many(self.embedder, [(text, extractions[text]) for text in texts],
                                         self._cache)))

    def _reread(self, conn: sqlite3.Connection, pid: int) -> Reading | None:
        """A stored passage read again (when it becomes the earliest holder of an entity or
        fact): the offline extractor gives the same places it gave at index time."""
        text, source = conn.execute("SELECT text, source FROM passages WHERE id = ?",
                                    (pid,)).fetchone()
        if source != "offline":  # an LLM's or a file's extraction places nothing: no reading
            return None
        return read(self.embedder, text, openie.extract_offline(text), self._cache)

    @staticmethod
    def _unread(texts: list[str], extractions: dict[str, openie.Extraction],
                readings: dict[str, Reading | None], names: list[str],
                facts: set[tuple[str, str, str]]) -> list[str]:
        """Names and fact texts to embed alone: the new ones that the first passage of the
        batch stating them (their holder once written) has no reading of."""
        out: list[str] = []
        names_left, facts_left = set(names), set(facts)
        for text in texts:
            ex, reading = extractions[text], readings.get(text)
            for name in ex.entities:
                if name in names_left:
                    names_left.discard(name)
                    if reading is None or name not in reading.entities:
                        out.append(name)
            for triple in ex.triples:
                if triple in facts_left:
                    facts_left.discard(triple)
                    if reading is None or triple not in reading.facts:
                        out.append(fact_text(*triple))
        return out + sorted(names_left) + [fact_text(*t) for t in sorted(facts_left)]

    def index_records(self, records: Sequence[Any]) -> None:
        """Index records with a `text` and optional `timestamp` (retrieval.MemoryRecord): the
        text is the passage, its time what recency counts from; importance is not used."""
        texts = check_texts([getattr(r, "text", None) for r in records], "docs")
        times = [getattr(r, "timestamp", None) for r in records]
        self._refuse_stale()
        self._catch_up()
        self._add(texts, {t: w for t, w in reversed(list(zip(texts, times)))})  # first one wins

    def _unknown(self, docs: list[str]) -> list[str]:
        unique = list(dict.fromkeys(docs))
        with self._store.read() as conn:
            return [d for d in unique if conn.execute(
                "SELECT 1 FROM passages WHERE hash = ?", (text_hash(d),)).fetchone() is None]

    def _missing(self, entities: set[str], triples: set[tuple[str, str, str]]
                 ) -> tuple[list[str], set[tuple[str, str, str]]]:
        """Entity names and facts the store has no vector for yet (embed only those)."""
        built = {t for t in triples if composed(t, self.fact_vectors)}  # from their names' vectors
        entities = entities | {n for t in built for n in (t[0], t[2])}
        # One query per chunk, not per name or fact: a ticket brings tens of each.
        have_names: set[str] = set()
        have_facts: set[tuple[str, str, str]] = set()
        wanted_names, wanted_facts = sorted(entities), sorted(triples - built)
        with self._store.read() as conn:
            for start in range(0, len(wanted_names), CHUNK):
                chunk = wanted_names[start:start + CHUNK]
                have_names.update(r[0] for r in conn.execute(
                    "SELECT e.name FROM entities e JOIN entity_vectors v ON v.id = e.id WHERE "
                    f"e.name IN ({','.join('?' * len(chunk))})", chunk))
            for start in range(0, len(wanted_facts), CHUNK // 3):
                facts = wanted_facts[start:start + CHUNK // 3]
                have_facts.update(conn.execute(
                    f"WITH t(s, p, o) AS (VALUES {','.join(['(?, ?, ?)'] * len(facts))}) "
                    "SELECT t.s, t.p, t.o FROM t JOIN entities s ON s.name = t.s JOIN facts f ON "
                    "f.subject = s.id AND f.predicate = t.p JOIN entities o ON o.id = f.object "
                    "AND o.name = t.o", [part for t in facts for part in t]).fetchall())
        return ([n for n in wanted_names if n not in have_names],
                {t for t in wanted_facts if t not in have_facts})

    def _extract(self, texts: list[str]) -> dict[str, openie.Extraction]:
        """OpenIE per passage from the configured source (LLM results cached by passage hash)."""
        opts: HippoRAGOptions = self.options  # type: ignore[assignment]
        cache = (openie.shared_openie_cache(retrieval.cache_dir())
                 if self.source == "llm" and opts.openie_cache else None)
        return {text: openie.extract(text, self.source, self.llm, self.precomputed,
                                     opts.llm_max_passage_chars, cache) for text in texts}

    def _write(self, work) -> Any:
        opts: HippoRAGOptions = self.options  # type: ignore[assignment]
        try:
            with self._store.write() as conn:
                self._entities.sync(self._store, conn)
                writer = GraphWriter(conn, self._entities, opts.synonymy_threshold,
                                     opts.synonymy_max_neighbours, opts.synonymy_min_chars,
                                     self._embed, self.clock(), self.fact_vectors,
                                     (lambda pid: self._reread(conn, pid))
                                     if self.fact_vectors == "passage" else None)
                result = work(writer)
                # Nothing changed (another writer was first): keep the generation, so no
                # instance reloads for nothing.
                gen = (self._store.bump(conn, writer.changes) if writer.changes
                       else self._store.generation(conn)[0])
        except BaseException:
            self._entities.invalidate()  # it holds rows of the rolled-back transaction
            raise
        self._entities.gen = gen
        return result

    def _rebuilt_store(self) -> Any:  # rebuild_in_place and CatchesUp (backends.rederive)
        return self._store

    def _rederive(self, conn: Any, keys: list[int]) -> None:
        """CatchesUp: each passage another program wrote removed with its graph (entities,
        facts, edges, vectors) and, when its row is there, added again at its time, as any
        passage is added (a text already stored is kept once)."""
        rows: dict[int, tuple[str, float]] = {}
        for start in range(0, len(keys), CHUNK):
            chunk = keys[start:start + CHUNK]
            rows.update((int(r[0]), (r[1], r[2])) for r in conn.execute(
                f"SELECT id, text, created_at FROM passages WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        self._write(lambda writer: writer.remove(keys))
        texts = [rows[k][0] for k in keys if k in rows]
        when: dict[str, float | None] = {}
        for k in reversed(keys):
            if k in rows:
                when[rows[k][0]] = rows[k][1]
        log.info("caught up on %d passage(s) another program wrote in %s", len(keys), self._store.path)
        self._add(texts, when)

    # --- delete / list --------------------------------------------------------------------

    def delete(self, docs: list[str]) -> int:
        docs = check_texts(docs, "docs")
        if not docs:
            return 0
        self._catch_up()
        with self._store.lock:
            with self._store.read() as conn:
                ids = [r[0] for d in dict.fromkeys(docs) if (r := conn.execute(
                    "SELECT id FROM passages WHERE hash = ?", (text_hash(d),)).fetchone())]
            if not ids:
                return 0

            def remove(writer: GraphWriter) -> int:
                present = [i for i in ids if writer.conn.execute(
                    "SELECT 1 FROM passages WHERE id = ?", (i,)).fetchone()]
                writer.remove(present)
                return len(present)

            return self._write(remove)


    # --- retrieve -------------------------------------------------------------------------

    def _sync(self) -> Graph | None:
        with self._store.read() as conn:
            self._passages.sync(self._store, conn)
            self._facts.sync(self._store, conn)
            graph = self._graph.sync(self._store, conn)
        if len(graph.passage_ids) == 0:
            return None
        if not (np.array_equal(graph.passage_ids, self._passages.docs)
                and np.array_equal(graph.fact_ids, self._facts.ids)):
            # most often a passage another program wrote (its graph and vectors are made
            # by middle's writes alone): the rebuild makes them, where the store is
            raise MemoryStoreError(f"the memory store {self._store.path} is inconsistent (vectors "
                                   "missing for some passages or facts: written by another program, "
                                   "or damaged): run `middle memory reindex --from hipporag` to "
                                   "rebuild it from its passages")
        return graph

    def retrieve(self, queries: list[str], num_to_retrieve: int) -> list[RetrieveResult]:
        queries = check_texts(queries, "queries")
        self._refuse_stale()
        self._catch_up()
        results: list[RetrieveResult] = []
        with self._store.lock:
            graph = self._sync() if queries else None
            for query in queries:
                self._pairs, self._times = {}, {}  # set by _supersede when the pool has pairs
                ranked = self._rank(graph, query, num_to_retrieve) if graph and num_to_retrieve > 0 else []
                texts = self._texts([pid for pid, _ in ranked])
                result: RetrieveResult = {"question": query, "docs": [texts[p] for p, _ in ranked],
                                          "doc_scores": [float(s) for _, s in ranked]}
                if self._pairs:
                    result["superseded"] = retrieval.supersession.marks(
                        [p for p, _ in ranked], self._pairs, self._times)
                results.append(result)
        return results

    def _texts(self, ids: list[int]) -> dict[int, str]:
        if not ids:
            return {}
        with self._store.read() as conn:
            return dict(conn.execute(f"SELECT id, text FROM passages WHERE id IN "
                                     f"({','.join('?' * len(ids))})", ids).fetchall())

    def _rank(self, graph: Graph, query: str, k: int) -> list[tuple[int, float]]:
        """PageRank over the graph seeded by the query (dense similarity when nothing links
        the query to the graph), then the recency blend over the best and the newest."""
        opts: HippoRAGOptions = self.options  # type: ignore[assignment]
        # The dense side reads the query's prose; the paths it names seed their entities exactly
        # (_named_entities), as hybrid's BM25 matches them (see retrieval.bm25.without_paths).
        q = self._query_vector(retrieval.bm25.without_paths(query))
        dense = self._passages.doc_scores(q).astype(np.float64)  # a passage's best chunk
        named = self._named_entities(graph, query)
        # A query of paths alone matches every "X changed a/b.py" fact about as well (paths
        # look alike to a sentence model): the paths it names are what it asks for.
        paths_only = bool(named) and retrieval.bm25.names_only_paths(query)
        facts = [] if paths_only else self._top_facts(graph, q, query)
        if not facts and not named:  # nothing links the query to the graph: dense retrieval
            return self._with_recency(_top(graph.passage_ids, dense, POOL * k), k)
        seeds = np.zeros(graph.adjacency.shape[0])
        for node in named:  # an entity the query names exactly: certain, so full weight
            seeds[node] = 1.0 / max(graph.passages_per_entity[node], 1.0)
        for i, score in facts:
            for node in (graph.fact_subject[i], graph.fact_object[i]):
                weight = score / max(graph.passages_per_entity[node], 1.0)
                seeds[node] = max(seeds[node], weight)
        seeds[graph.n_entities:] = _minmax(dense) * opts.passage_node_weight
        rank = personalized_pagerank(graph, seeds, opts.damping, opts.ppr_max_iterations,
                                     opts.ppr_tolerance)
        mass = rank[graph.n_entities:].astype(np.float64)
        return self._with_recency(_top(graph.passage_ids, mass, POOL * k), k,
                                  _SaturatedMass(graph.passage_ids, mass))

    def _with_recency(self, ranked: list[tuple[int, float]], k: int,
                      mass: _SaturatedMass | None = None) -> list[tuple[int, float]]:
        """The best k by (1 - w) * relevance + w * recency; the newest passages join
        the pool (see RecencyOptions). Relevance is the PageRank mass saturated over the pool
        (_SaturatedMass) or, for dense scores, min-max normalised over the ranked list."""
        opts: HippoRAGOptions = self.options  # type: ignore[assignment]
        if not opts.recency_weight or not ranked:
            # Relevance alone; a tie goes to the newer passage (ids grow as passages are added),
            # and an amendment in the pool ranks right above the decision it supersedes.
            ranked = sorted(ranked, key=lambda item: (-item[1], -item[0]))
            return self._supersede(ranked, k)
        ids = [pid for pid, _ in ranked]
        with self._store.read() as conn:
            if opts.recent_candidates:
                held = set(ids)
                ids += [pid for (pid,) in conn.execute(
                    "SELECT id FROM passages ORDER BY created_at DESC, id DESC LIMIT ?",
                    (len(ranked),)) if pid not in held]
            times = dict(conn.execute(f"SELECT id, created_at FROM passages WHERE id IN "
                                      f"({','.join('?' * len(ids))})", ids).fetchall())
        relevance = mass.relevance(ids) if mass is not None else retrieval.fusion.min_max(ranked)
        now = self.clock()
        blended = [(pid, retrieval.pipeline.with_recency(relevance.get(pid, 0.0),
                                                         times.get(pid, now), now, opts))
                   for pid in ids]
        return sorted(blended, key=lambda item: (-item[1], item[0]))[:k]

    def _supersede(self, ranked: list[tuple[int, float]], k: int) -> list[tuple[int, float]]:
        """retrieval.supersession over the pool; the pairs and times wait for retrieve."""
        ids = [pid for pid, _ in ranked]
        with self._store.read() as conn:
            rows = conn.execute(f"SELECT id, text, created_at FROM passages WHERE id IN "
                                f"({','.join('?' * len(ids))})", ids).fetchall()
        pool = [retrieval.supersession.Memory(pid, text, when) for pid, text, when in rows]
        top, self._pairs = retrieval.supersession.reorder(ranked, k, pool)
        self._times = {pid: when for pid, _, when in rows}
        return top

    def _named_entities(self, graph: Graph, query: str) -> list[int]:
        """Nodes of the graph's entities that the query names, found by the offline extractor
        (the same normalised names the graph holds)."""
        names = openie.extract_offline(query[:MAX_QUERY_CHARS]).entities
        return [n for n in (graph.entity_node(name) for name in names) if n is not None]

    def _top_facts(self, graph: Graph, q: np.ndarray, query: str) -> list[tuple[int, float]]:
        """(fact position, min-max normalised score) of the best facts, after the LLM filter."""
        opts: HippoRAGOptions = self.options  # type: ignore[assignment]
        scores = self._facts.scores(q).astype(np.float64)
        if len(scores) == 0:
            return []
        # A fact seeds its entities by how surely the query refers to it: its cosine, so a
        # weak best match stays weak (min-max would make any best fact count as much as a
        # name the query contains); "minmax" is HippoRAG 2's normalisation within the query.
        norm = _minmax(scores) if opts.fact_weight == "minmax" else np.clip(scores, 0.0, 1.0)
        k = min(opts.fact_top_k, len(scores))
        cutoff = np.partition(norm, len(norm) - k)[len(norm) - k]
        pool = np.flatnonzero(norm >= cutoff)  # ties at the cut broken by content, not row ids
        picked = sorted(pool.tolist(), key=lambda i: (-norm[i], graph.fact_key(i)))[:k]
        if self.llm is not None and opts.recognition_filter:
            keep = openie.llm_filter(self.llm, query, [graph.fact_key(i) for i in picked])
            picked = [picked[j] for j in keep]
        return [(int(i), float(norm[i])) for i in picked]

    def explain(self, query: str, docs: Sequence[str]) -> list[dict[str, Any]]:
        """Each passage's graph path: the entities the query names that it mentions, the best
        facts of the query it states (as the passage's own sentence that states each: the
        offline extractor's triples read as fragments), its date, and its best chunk's cosine
        to the query."""
        self._catch_up()
        with self._store.lock:
            graph = self._sync()
            named = set(openie.extract_offline(query[:MAX_QUERY_CHARS]).entities)
            q = self._query_vector(retrieval.bm25.without_paths(query))
            facts = [] if graph is None else self._top_facts(graph, q, query)
            out: list[dict[str, Any]] = []
            with self._store.read() as conn:
                for doc in docs:
                    row = conn.execute("SELECT id, created_at FROM passages WHERE hash = ?",
                                       (text_hash(doc),)).fetchone()
                    if row is None:
                        out.append({})
                        continue
                    pid, when = row
                    names = {n for (n,) in conn.execute(
                        "SELECT e.name FROM passage_entities pe JOIN entities e ON e.id = pe.entity"
                        " WHERE pe.passage = ?", (pid,))}
                    stated = {f for (f,) in conn.execute(
                        "SELECT fact FROM passage_facts WHERE passage = ?", (pid,))}
                    signals: dict[str, Any] = {"date": when}
                    if named & names:
                        signals["graph"] = sorted(named & names)[:4]
                    if graph is not None:
                        said = [fact_sentence(doc, *graph.fact_key(i)) for i, _ in facts
                                if int(graph.fact_ids[i]) in stated]
                        said = list(dict.fromkeys(s for s in said if s))
                        if said:
                            signals["facts"] = said[:2]
                        scores = self._passages.doc_scores(q)
                        at = np.flatnonzero(self._passages.docs == pid)
                        if len(at):
                            signals["similarity"] = float(scores[at[0]])
                    out.append(signals)
        return out

    # --- inspection -----------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Counts of passages, entities, facts and edges (for `middle memory graph`)."""
        with self._store.read() as conn:
            return {name: int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
                    for name, table in (("passages", "passages"), ("entities", "entities"),
                                        ("facts", "facts"), ("fact_edges", "fact_edges"),
                                        ("passage_entity_edges", "passage_entities"),
                                        ("synonymy_links", "synonyms"))}

    def read(self):
        """A read transaction on the store (for the graph export)."""
        return self._store.read()

    def close(self) -> None:
        self._store.close()
        self._graph.invalidate()


class _SaturatedMass:
    """Relevance from PageRank mass for the recency blend: a candidate's mass m as m / (m + M),
    M the median mass of the pool (the best by PageRank and the newest passages alike).

    PageRank mass is heavy-tailed: a passage holding the only mention of a rare entity takes
    ten or a hundred times the mass of one sharing the query's common paths. Min-max over
    the pool made that one passage 1 and every other ~0, so among the recent passages recency
    alone decided and relevance was ignored (measured on the ticket replay's development
    split). Saturating at the pool's typical mass keeps the order, gives the typical
    candidate 0.5 and lets a passage with several times that approach 1, as BM25's term
    frequency saturates. With every passage of one age (MuSiQue) the order is PageRank's."""

    def __init__(self, passage_ids: np.ndarray, mass: np.ndarray):
        self.passage_ids, self.mass = passage_ids, mass

    def relevance(self, ids: list[int]) -> dict[int, float]:
        # passage_ids is ascending. A passage another process added after this query's graph
        # was read (the newest ones are read apart) has no mass yet.
        at = np.minimum(np.searchsorted(self.passage_ids, ids), len(self.passage_ids) - 1)
        known = self.passage_ids[at] == np.asarray(ids, dtype=self.passage_ids.dtype)
        values = np.where(known, np.clip(self.mass[at], 0.0, None), 0.0)
        typical = float(np.median(values))
        if typical <= 0:  # most of the pool has no mass: any mass is relevant
            return {pid: float(v > 0) for pid, v in zip(ids, values)}
        return {pid: float(v / (v + typical)) for pid, v in zip(ids, values)}


def _minmax(values: np.ndarray) -> np.ndarray:
    if len(values) == 0:
        return values
    low, high = values.min(), values.max()
    if high - low <= 0:
        return np.ones_like(values)
    return (values - low) / (high - low)


def _top(ids: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Best k (id, score), ties kept in id order (older first)."""
    if k < len(scores):  # partition first: sorting every passage per query cost ~2 ms at 10k
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        pool = np.flatnonzero(scores >= kth)  # every tie at the cut, in id order
    else:
        pool = np.arange(len(scores))
    order = pool[np.argsort(-scores[pool], kind="stable")][:k]
    return [(int(ids[i]), float(scores[i])) for i in order]


_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_NOT_WORD = re.compile(r"[^0-9a-z]+")
MAX_FACT_CHARS = 160


def fact_sentence(doc: str, subject: str, _relation: str, obj: str) -> str | None:
    """The passage's sentence that states a fact (subject, relation, object): the first that
    names both its entities (compared as the extractor names them: lower case, words only),
    cut to MAX_FACT_CHARS; None when no one sentence names both."""
    want = [f" {_NOT_WORD.sub(' ', part.lower()).strip()} " for part in (subject, obj)]
    for sentence in _SENTENCES.split(doc):
        flat = f" {_NOT_WORD.sub(' ', sentence.lower()).strip()} "
        if all(w.strip() and w in flat for w in want):
            text = " ".join(sentence.split())
            return text if len(text) <= MAX_FACT_CHARS else text[:MAX_FACT_CHARS - 1].rstrip() + "…"
    return None
