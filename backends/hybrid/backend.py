"""HybridBackend: dense and BM25 candidates fused, then the retrieval pipeline stages."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from backends import retrieval

HybridOptions = retrieval.HybridOptions
MemoryRecord = retrieval.MemoryRecord
pipeline = retrieval.pipeline


class HybridBackend(retrieval.RetrievalBackend):
    """The recommended general-purpose backend: keywords and meaning both count.

    On `middle bench` it beats BM25 and dense alone on LoCoMo; see the options for each stage.
    """

    name = "hybrid"
    supersedes = True
    description = ("Dense + BM25 fused (min-max weighted sum), then importance and "
                   "optional rerank/MMR/dedup/token budget.")
    Options = HybridOptions
    # Its vectors read a doc's prose, as its dense half reads a query's: BM25 matches the paths
    # (chunking.PROSE: a path list is outside what a sentence embedder reads well, and a third
    # of a completion doc's or a commit's word pieces, which the model's time grows with).
    embed_view = retrieval.chunking.PROSE

    def _rank(self, query: str, k: int) -> list[tuple[int, float]]:
        opts: HybridOptions = self.options  # type: ignore[assignment]
        pool = k * opts.candidate_multiplier
        fused = self._fused(query, pool)
        if opts.issue_hop:
            fused = self._hop(fused, k, pool)[0]
        if opts.burst_weight > 0:
            fused = self._lend(fused, opts)[0]
        if opts.thread_weight > 0:
            fused = self._near_in_time(fused, pool, opts)
        if opts.recent_candidates and opts.recency_weight > 0:
            held = {i for i, _ in fused}
            fused += [(i, 0.0) for i in self._store.recent(pool) if i not in held]
        if not fused:
            return []
        ids = [i for i, _ in fused]
        rows = self._store.rows(ids)
        if opts.rerank and not self._widening:
            fused = [(i, s) for i, s in fused if i in rows]
            late = self._late_scores(query, [rows[i].text for i, _ in fused])
            fused = retrieval.late.reorder(fused, late, opts.rerank)
        vectors = self._store.vectors(ids) if opts.mmr_lambda is not None else {}
        candidates = [
            pipeline.Candidate(i, rows[i].text, score, rows[i].doc_time, rows[i].importance,
                               retrieval.chunking.doc_vector(vectors[i]) if i in vectors else None)
            for i, score in fused if i in rows
        ]
        reranker = pipeline.load_reranker(opts.rerank_model) if opts.rerank_model else None
        picked = pipeline.run(query, candidates, k, opts, self.clock(), reranker)
        return [(c.id, c.score) for c in picked]

    # Set while the supersession step ranks its wider pool (retrieval.backend._supersede): that
    # pool is read only for amendments of the top k, so its order needs no rerank, and
    # reranking 3 times the pool would triple the reranker's cost for nothing.
    _widening = False

    def _supersede(self, query: str, ranked: list[tuple[int, float]],
                   k: int) -> tuple[list[tuple[int, float]], dict[int, int]]:
        self._widening = True  # under the store's lock, as every retrieve
        try:
            return super()._supersede(query, ranked, k)
        finally:
            self._widening = False

    def _late_scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Each text's late-interaction score for the query (retrieval.late), both read as the
        dense half reads them: the query's and the doc's prose (embed_view)."""
        if self._late is None:
            self._late = retrieval.late.LateScorer(self.embedder)  # type: ignore[arg-type]
        return self._late.scores(retrieval.bm25.without_paths(query),
                                 [retrieval.chunking.view_of(t, self.embed_view) for t in texts])

    _late: retrieval.late.LateScorer | None = None

    def _fused(self, query: str, pool: int) -> list[tuple[int, float]]:
        """The query's own ranking: its dense and BM25 candidates fused, the best `pool`."""
        opts: HybridOptions = self.options  # type: ignore[assignment]
        # The dense half reads the query's prose, BM25 all of it (paths too): see without_paths.
        dense = self._dense(retrieval.bm25.without_paths(query), pool)
        sparse = self._store.bm25(query, pool)
        # More lexical lists (thread_expansion's, thread_docs'): each takes an equal share of
        # the lexical half, no evidence weighing one over another (plan7.md, plan8.md).
        more: list[list[tuple[int, float]]] = []
        if opts.thread_expansion:
            wider = self._store.bm25(self._expansion(query).query(), pool)
            if wider:  # nothing learned, or nothing found: no list
                more.append(wider)
        if opts.thread_docs:
            own = retrieval.fusion.fuse(opts.fusion, dense, sparse, opts.dense_weight, opts.rrf_k)
            listed = self._thread_list(query, pool, dict(own)).ranked
            if listed:  # no thread matched: no list
                more.append(listed)
        if more:
            share = (1 - opts.dense_weight) / (1 + len(more))
            return retrieval.fusion.fuse_many(
                opts.fusion, [(opts.dense_weight, dense), (share, sparse)]
                + [(share, ranked) for ranked in more], opts.rrf_k)[:pool]
        return retrieval.fusion.fuse(opts.fusion, dense, sparse, opts.dense_weight, opts.rrf_k)[:pool]

    _threads: retrieval.thread_docs.ThreadIndex | None = None

    def _thread_list(self, query: str, pool: int,
                     own: dict[int, float]) -> retrieval.thread_docs.ThreadList:
        """The members of the issue threads best matching the query as whole documents
        (retrieval.thread_docs); the threads follow the store's docs (rewritten when they
        change)."""
        if self._threads is None:
            self._threads = retrieval.thread_docs.ThreadIndex()
        if (changed := self._texts_since(self._threads.key)) is not None:
            self._threads.update(*changed, self._store.code_terms)
        return self._threads.thread_list(query, pool, own)

    _associations: retrieval.expansion.Associations | None = None

    def _expansion(self, query: str) -> retrieval.expansion.Expansion:
        """The query's expansion by the words the store's issue threads associate with its own
        (retrieval.expansion); the table follows the store's docs (rebuilt when they change)."""
        if self._associations is None:
            self._associations = retrieval.expansion.Associations()
        if (changed := self._texts_since(self._associations.key)) is not None:
            self._associations.update(*changed)
        return self._associations.expand(query)

    def _texts_since(self, key: str | None) -> tuple[str, dict[int, str]] | None:
        """The store's fingerprint and its docs' texts when the docs changed since `key` (what a
        table built from them was built at); None when they did not."""
        now = self._store.fingerprint()
        if now == key:
            return None
        with self._store.read() as conn:
            return now, self._store.doc_texts(conn)

    def _hop(self, fused: list[tuple[int, float]], k: int, pool: int
             ) -> tuple[list[tuple[int, float]], dict[int, tuple[int, int]]]:
        """The ranking joined with the docs that name an issue one of its first k names
        (retrieval.issues), and per doc reached that way its lender and the issue. Each issue
        brings at most `pool` docs, newest first: as many as the ranking weighs."""
        lenders = [i for i, _ in fused[:k]]
        texts = {i: row.text for i, row in self._store.rows(lenders).items()}
        return retrieval.issues.hop(
            fused, k, texts,
            lambda issue: self._store.containing(retrieval.issues.needle(issue), pool))

    def _lend(self, fused: list[tuple[int, float]], opts: HybridOptions
              ) -> tuple[list[tuple[int, float]], dict[int, tuple[int, int, str]]]:
        """The ranking with each of the best matches lending part of its score to its
        burst-mates (retrieval.burst), and who lent to whom."""
        sources = [i for i, _ in fused[:retrieval.burst.SOURCES]]
        around = self._store.around(sources, retrieval.burst.REACH)
        texts = {i: row.text for i, row in self._store.rows(sources).items()}
        return retrieval.burst.lend(fused, around, texts, opts.burst_weight)

    def _newest(self, pool: int, opts: HybridOptions) -> list[int]:
        return self._store.recent(max(pool, retrieval.thread.REACH * opts.thread_scale_docs))

    def _near_in_time(self, fused: list[tuple[int, float]], pool: int,
                      opts: HybridOptions) -> list[tuple[int, float]]:
        """The ranking with the work just before it weighed in (retrieval.thread): the newest
        `pool` docs join the candidates, and each candidate's relevance is blended with how
        few docs are newer than it."""
        if opts.fusion == "rrf":  # rank-based scores bunch near 1: spread them as the others are
            fused = sorted(retrieval.fusion.min_max(fused).items(), key=lambda item: (-item[1], item[0]))
        return retrieval.thread.blend(fused, self._newest(pool, opts), pool, opts.thread_weight,
                                      opts.thread_scale_docs)

    def explain(self, query: str, docs: Sequence[str]) -> list[dict[str, Any]]:
        """The retrieval signals, and a doc's place in time when it counted: the query
        continues a thread (retrieval.thread.in_thread) and the doc is within its reach."""
        out = super().explain(query, docs)
        opts: HybridOptions = self.options  # type: ignore[assignment]
        if opts.rerank and docs:
            how = (" (its order fused with the first ranking's by reciprocal rank)"
                   if opts.rerank == "maxsim-rrf" else "")
            for signals, score in zip(out, self._late_scores(query, list(docs))):
                signals["rerank"] = (f"reranked: late interaction (MaxSim) score {score:.2f}, "
                                     f"each query word's best match in the doc{how}")
        if opts.issue_hop and docs:
            self._explain_hop(query, docs, out, opts)
        if opts.thread_expansion and docs:
            with self._store.lock:
                expansion = self._expansion(query)
            for doc, signals in zip(docs, out):
                found = retrieval.expansion.matched(expansion, doc)
                if found:
                    signals["thread_words"] = retrieval.expansion.explain_line(found, expansion)
        if opts.thread_docs and docs:
            self._explain_threads(query, docs, out, opts)
        if opts.burst_weight > 0 and docs:
            self._explain_burst(query, docs, out, opts)
        if opts.thread_weight <= 0 or not docs:
            return out
        with self._store.lock:
            self._store.sync()
            best = self._fused(query, retrieval.thread.BEST)
            newest = self._newest(retrieval.thread.BEST, opts)
            place = {doc: n for n, doc in enumerate(newest)}
            if not retrieval.thread.in_thread(best, place, opts.thread_scale_docs):
                return out
            with self._store.read() as conn:
                ids = self._store.ids_by_text(conn, list(docs))
        for doc, signals in zip(docs, out):
            n = place.get(ids.get(doc, -1))
            if n is not None:
                share = opts.thread_weight * retrieval.thread.place_weight(n, opts.thread_scale_docs)
                signals["recency"] = (f"thread: {n} newer doc(s), its place counted {share:.2f} "
                                      "(the query continues recent work)")
        return out

    def _explain_hop(self, query: str, docs: Sequence[str], out: list[dict[str, Any]],
                     opts: HybridOptions) -> None:
        """A doc's issue signal: the issue it shares with one of the query's best matches, and
        that match's place (the ranking redone for as many docs as `docs`)."""
        k = max(len(docs), 1)
        pool = k * opts.candidate_multiplier
        with self._store.lock:
            self._store.sync()
            fused = self._fused(query, pool)
            _, lenders = self._hop(fused, k, pool)
            with self._store.read() as conn:
                ids = self._store.ids_by_text(conn, list(docs))
            heads = {i: row.text for i, row in self._store.rows(
                [lender for lender, _ in lenders.values()]).items()}
        place = {i: n for n, (i, _) in enumerate(fused)}
        for doc, signals in zip(docs, out):
            lent = lenders.get(ids.get(doc, -1))
            if lent is not None:
                lender, issue = lent
                head = heads.get(lender, "")[:60]
                signals["issue"] = (f"issue: names #{issue}, as does the match ranked "
                                    f"{place[lender] + 1} (\"{head}\")")

    def _explain_threads(self, query: str, docs: Sequence[str], out: list[dict[str, Any]],
                         opts: HybridOptions) -> None:
        """A doc's thread signal: the issue thread that scored it in the thread list, the
        query's words that thread holds and its size (the list redone for as many docs as
        `docs`)."""
        pool = max(len(docs), 1) * opts.candidate_multiplier
        with self._store.lock:
            self._store.sync()
            dense = self._dense(retrieval.bm25.without_paths(query), pool)
            own = retrieval.fusion.fuse(opts.fusion, dense, self._store.bm25(query, pool),
                                        opts.dense_weight, opts.rrf_k)
            listed = self._thread_list(query, pool, dict(own))
            with self._store.read() as conn:
                ids = self._store.ids_by_text(conn, list(docs))
            index = self._threads
        assert index is not None  # _thread_list made it
        for doc, signals in zip(docs, out):
            issue = listed.thread_of.get(ids.get(doc, -1))
            if issue is not None:
                signals["thread_docs"] = retrieval.thread_docs.explain_line(
                    issue, index.matched_words(issue, query), len(index.members(issue)))

    def _explain_burst(self, query: str, docs: Sequence[str], out: list[dict[str, Any]],
                       opts: HybridOptions) -> None:
        """A doc's burst signal: the strong match that lent to it most, how far away in time
        and the file they both name (the ranking redone over as large a pool as returned
        `docs`)."""
        with self._store.lock:
            self._store.sync()
            fused = self._fused(query, max(len(docs), 1) * opts.candidate_multiplier)
            _, lenders = self._lend(fused, opts)
            with self._store.read() as conn:
                ids = self._store.ids_by_text(conn, list(docs))
        score = dict(fused)
        for doc, signals in zip(docs, out):
            lent = lenders.get(ids.get(doc, -1))
            if lent is not None:
                source, away, path = lent
                signals["burst"] = (f"burst: {away} doc(s) from a strong match that also names "
                                    f"{path} (lent {opts.burst_weight * score[source]:.2f})")

    def _write(self, records: list[MemoryRecord], vectors: list[np.ndarray] | None) -> None:
        threshold = self.options.dedup_threshold  # type: ignore[attr-defined]
        if threshold is None or vectors is None or not records:
            return super()._write(records, vectors)
        plan = self._plan_merges(records, vectors, threshold)
        now = self.clock()
        with self._store.write() as conn:
            touched = []
            for target, record, vector in plan:
                if target is not None and self._store.replace(conn, target, record, vector, now):
                    touched.append(target)
                    continue
                doc_id = self._store.insert(conn, record, vector, now)
                if doc_id is not None:
                    touched.append(doc_id)
            if touched:
                self._store.bump(conn, touched)

    def _plan_merges(self, records: list[MemoryRecord], chunked: list[np.ndarray],
                     threshold: float):
        """The near-duplicate merge: each new doc either updates the most similar stored
        doc (cosine >= threshold) or is added; a later doc of the same batch that nearly repeats
        an earlier one replaces it in the plan. Docs are compared by their first chunk (a near
        duplicate starts the same) against every stored chunk."""
        index = self._store.sync()
        vectors = np.vstack([c[0] for c in chunked])
        similar = vectors @ vectors.T
        plan: list[list] = []  # [target id or None, record, vector, batch position]
        for i, record in enumerate(records):
            best_score, best_target = threshold, None
            if index is not None:  # an empty index finds nothing (on PostgreSQL len() is a query)
                ids, scores = index.search(vectors[i], 1)
                if ids and scores[0] >= best_score:
                    best_score, best_target = scores[0], ids[0]
            earlier = [j for j, step in enumerate(plan) if similar[i, step[3]] >= best_score]
            if earlier:
                j = max(earlier, key=lambda j: similar[i, plan[j][3]])
                plan[j][1:] = [record, chunked[i], i]
            else:
                plan.append([best_target, record, chunked[i], i])
        return [(target, record, vector) for target, record, vector, _ in plan]
