"""HindsightBackend: the memory contract on retain/recall, plus reflect, fact deletion, mental
models and the optional turn-retaining lifecycle (Hindsight's coding-agent integration)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, ClassVar, Sequence

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
from backends.storage import in_clause, salvage_rows, warn_outside_writes
from orchestrator.plugin_api import (
    BackendOptions,
    MemoryBackend,
    MemoryDatabase,
    MemoryStoreError,
    RetrieveResult,
    TextLLM,
    check_texts,
)

from . import extract, lifecycle
from . import recall as recall_mod
from . import reflect as reflect_mod
from .bank import open_bank
from .observations import remove_facts
from .options import HindsightOptions
from .retain import RetainItem, check_tags, retain_items, text_hash

log = logging.getLogger("middle.hindsight")
SECOND_FACT_WEIGHT = 0.3  # a document with two matching facts beats one with a single match


class HindsightBackend(SharesDatabase, CatchesUp, DocumentListing, DocumentTableRebuild, MemoryBackend):
    """Typed facts with entities, links and observations in one bank per project (a SQLite file,
    or the project's schema in PostgreSQL with `[memory] url`)."""

    name = "hindsight"
    description = ("Hindsight-style: retain typed facts (entities, dates, links, observations), "
                   "recall by semantic + keyword + graph + temporal, reflect, mental models.")
    Options = HindsightOptions
    store_files = ("hindsight.sqlite3",)

    @classmethod
    def salvage_records(cls, store_dir: Path) -> list[tuple[str, float | None]]:
        return salvage_rows(Path(store_dir) / "hindsight.sqlite3", "documents", ("text", "event_time"))
    keeps_times = True  # a retained doc's time is its facts' event time
    recall: ClassVar[str] = "relevance"

    def __init__(self, store_dir: Path, options: BackendOptions | dict[str, Any] | None = None,
                 llm: TextLLM | None = None, *, database: MemoryDatabase | None = None):
        super().__init__(store_dir, self._coerce(options), llm)
        self.options: HindsightOptions
        self.database = database
        self.bank = open_bank(self.store_dir, database)
        self._doc_table = DocumentTable(self.bank.read, "documents", "event_time", "text_hash", text_hash)
        try:
            claim_backend(self.bank, self.name)
            warn_outside_writes(self.bank, self.name, "facts, entities and observations", log)
            self.embedder = bind_embedder(self.bank, self.options, self.name, "facts")
            self.fact_vectors = claim_vector_kind(self.bank, self.options.fact_vectors,
                                                  "vectors", self.name)
        except BaseException:
            self.bank.close()
            raise
        self.cache = retrieval.shared_cache() if self.options.embedding_cache and self.embedder.cacheable else None
        self.query_vector = QueryVectors(self.embedder)

    @classmethod
    def _coerce(cls, options: BackendOptions | dict[str, Any] | None) -> HindsightOptions:
        return coerce_options(cls, options)  # type: ignore[return-value]

    # --- helpers used by retain / recall -------------------------------------------------------

    def has_facts(self) -> bool:
        with self.bank.read() as conn:
            return conn.execute("SELECT 1 FROM facts LIMIT 1").fetchone() is not None

    def recall_facts(self, query: str, k: int, **kwargs: Any) -> list[recall_mod.Hit]:
        return recall_mod.recall(self, query, k, **kwargs).hits

    # --- Hindsight's own API -----------------------------------------------------------------

    def retain(self, text: str, timestamp: float | None = None, tags: Sequence[str] | None = None,
               document_id: str | None = None) -> int | None:
        """Retain one document; re-retaining a document id replaces its facts. Returns the
        document's row id (None when the same text was already retained under that id)."""
        (text,) = check_texts([text], "text")
        self._catch_up()
        written = self._retain([RetainItem(text, _check_time(timestamp), check_tags(tags),
                                           None if document_id is None else str(document_id), "retain")])
        return written[0] if written else None

    def index_records(self, records: Sequence[Any]) -> None:
        """Docs with their event times (`MemoryRecord`s, as `middle bench memory` passes)."""
        self._catch_up()
        items = []
        for record in records:
            (text,) = check_texts([getattr(record, "text", None)], "docs")
            items.append(RetainItem(text, _check_time(getattr(record, "timestamp", None))))
        self._retain(items)

    def embeds_docs(self) -> bool:
        return True

    def warm_embeddings(self, docs: Sequence[str]) -> None:
        """Embed the offline facts of docs into the cache without retaining them (`middle
        bench` times embedding and the bank apart)."""
        if self.cache is None:
            return
        now = self.clock()
        pooled = self.fact_vectors == "passage" and self.embedder.token_states("") is not None
        texts = [f.text for d in check_texts(list(docs), "docs")
                 for f in extract.extract(d, now, self.options.max_facts_per_doc)
                 if not (pooled and f.ranges)]  # pooled at retain from the doc's own pass
        retrieval.embed_documents(self.embedder, texts, self.cache)

    def _retain(self, items: list[RetainItem]) -> list[int]:
        if not items:
            return []
        return retain_items(self, items)

    def _refresh_if_due(self) -> None:
        """Refresh the mental models when refresh_every_retains retains have happened since
        the last refresh. Done when the models are read, not in the retain that made them
        due: a retain stays cheap, and retains between two reads share one refresh."""
        every = self.options.refresh_every_retains
        if not (every and self.options.mental_models):
            return
        with self.bank.read() as conn:
            due = int(self.bank.meta(conn, "retains_since_refresh") or 0) >= every
        if due:
            try:
                reflect_mod.refresh_models(self)
            except Exception as exc:  # the models stay as they were; the next read retries
                log.warning("hindsight mental models not refreshed: %s", exc)

    def recall_query(self, query: str, budget: int = 10, max_tokens: int | None = None,
                     types: Sequence[str] | None = None, tags: Sequence[str] | None = None,
                     tags_match: str = "any") -> recall_mod.Recalled:
        """Hindsight's recall: at most `budget` facts within `max_tokens`, filtered by kind and tags."""
        (query,) = check_texts([query], "query")
        self._catch_up()
        bad = set(types or ()) - set(recall_mod.KINDS)
        if bad:
            raise ValueError(f"unknown fact type(s) {sorted(bad)}: use {', '.join(recall_mod.KINDS)}")
        if tags_match not in ("any", "all"):
            raise ValueError("tags_match must be 'any' or 'all'")
        return recall_mod.recall(self, query, budget, budget_tokens=max_tokens, types=types,
                                 tags=check_tags(tags), tags_match=tags_match)

    def reflect(self, question: str) -> reflect_mod.Reflection:
        (question,) = check_texts([question], "question")
        self._catch_up()
        return reflect_mod.reflect(self, question)

    def delete_fact(self, fact_id: int) -> bool:
        """Delete one fact (or observation) exactly; a document left with no facts goes too."""
        with self.bank.write() as conn:
            row = conn.execute("SELECT doc_id FROM facts WHERE id = ?", (int(fact_id),)).fetchone()
            if row is None:
                return False
            touched: list[int] = []
            remove_facts(self, conn, [int(fact_id)], touched)
            if row[0] is not None and not conn.execute(
                    "SELECT 1 FROM facts WHERE doc_id = ? LIMIT 1", (row[0],)).fetchone():
                conn.execute("DELETE FROM documents WHERE id = ?", (row[0],))
            self.bank.bump(conn, touched)
        return True

    def mental_models(self) -> list[dict[str, Any]]:
        self._refresh_if_due()
        with self.bank.read() as conn:
            rows = conn.execute("SELECT name, question, content, version, updated_at, fact_ids "
                                "FROM mental_models ORDER BY name").fetchall()
        out = []
        for r in rows:
            try:
                fact_ids = json.loads(r[5])
            except json.JSONDecodeError:
                raise MemoryStoreError(f"the hindsight bank {self.bank.path} is corrupt (mental model "
                                       f"{r[0]!r} has fact ids that are not JSON); move it away") from None
            out.append({"name": r[0], "question": r[1], "content": r[2], "version": r[3],
                        "updated_at": r[4], "fact_ids": fact_ids})
        return out

    def refresh_mental_models(self) -> list[str]:
        return reflect_mod.refresh_models(self)

    # --- the memory contract -------------------------------------------------------------------

    def index(self, docs: list[str]) -> None:
        docs = check_texts(docs, "docs")
        self._catch_up()
        self._retain([RetainItem(d) for d in docs])

    def retrieve(self, queries: list[str], num_to_retrieve: int) -> list[RetrieveResult]:
        queries = check_texts(queries, "queries")
        self._catch_up()
        return [self._retrieve_one(q, num_to_retrieve) for q in queries]

    def _retrieve_one(self, query: str, k: int) -> RetrieveResult:
        if k <= 0:
            return {"question": query, "docs": [], "doc_scores": []}
        facts_mode = self.options.retrieve_returns == "facts"
        wanted = k if facts_mode else 5 * k  # enough facts for k documents (a doc has several)
        hits = recall_mod.recall(self, query, wanted).hits
        if facts_mode:
            return {"question": query, "docs": [f"{h.text} ({h.when})" if h.when else h.text for h in hits],
                    "doc_scores": [float(h.score) for h in hits]}
        docs, doc_scores, superseded = self._documents(hits, k)
        result: RetrieveResult = {"question": query, "docs": docs, "doc_scores": doc_scores}
        if superseded:
            result["superseded"] = superseded
        return result

    def _documents(self, hits: list[recall_mod.Hit], k: int) -> tuple[list[str], list[float], list[dict[str, Any]]]:
        """Facts to their documents, each scored by its best fact plus a share of its second;
        an observation stands for the documents of the facts supporting it."""
        scores: dict[int, float] = {}
        best: dict[int, recall_mod.Hit] = {}
        obs = [h for h in hits if h.doc_id is None]
        with self.bank.read() as conn:
            support: dict[int, list[int]] = {}
            if obs:
                ids = [h.id for h in obs]
                for obs_id, doc_id in conn.execute(
                        f"SELECT s.obs_id, f.doc_id FROM observation_support s JOIN facts f ON "
                        f"f.id = s.fact_id WHERE s.obs_id IN {in_clause(ids)}", ids):
                    support.setdefault(obs_id, []).append(doc_id)
            per_doc: dict[int, list[float]] = {}
            for hit in hits:
                for doc_id in ([hit.doc_id] if hit.doc_id is not None else support.get(hit.id, [])):
                    if doc_id is None:
                        continue
                    per_doc.setdefault(doc_id, []).append(hit.score)
                    if hit.score > max(per_doc[doc_id][:-1], default=-1.0):
                        best[doc_id] = hit
            for doc_id, values in per_doc.items():
                values.sort(reverse=True)
                scores[doc_id] = values[0] + SECOND_FACT_WEIGHT * sum(values[1:2])
            ordered = sorted(scores.items(), key=lambda x: (-x[1], x[0]))
            # Supersession over every document the facts reached (retrieval.supersession):
            # an amendment ranks right above the decision it amends, which stays, marked.
            pool_ids = [d for d, _ in ordered]
            rows = {r[0]: (r[1], r[2], r[3]) for r in conn.execute(
                f"SELECT id, text, source, retained_at FROM documents WHERE id IN "
                f"{in_clause(pool_ids)}", pool_ids)} if pool_ids else {}
        pool = [retrieval.supersession.Memory(d, text, when)
                for d, (text, source, when) in rows.items() if source != "turns"]
        ranked, pairs = retrieval.supersession.reorder(ordered, k, pool)
        docs: list[str] = []
        doc_scores: list[float] = []
        for doc_id, score in ranked:
            if doc_id not in rows:
                continue
            text, source, _ = rows[doc_id]
            if source == "turns":  # a window of turns is long: its best fact speaks for it
                hit = best[doc_id]
                text = f"{hit.text} ({hit.when})" if hit.when else hit.text
            docs.append(text)
            doc_scores.append(float(score))
        superseded: list[dict[str, Any]] = []
        if pairs:
            shown = [d for d, _ in ranked if d in rows]
            superseded = retrieval.supersession.marks(
                shown, pairs, {d: when for d, (_, _, when) in rows.items()})
        return docs, doc_scores, superseded

    def explain(self, query: str, docs: Sequence[str]) -> list[dict[str, Any]]:
        """Why each doc was recalled, in the signals recall fused: the strategies (semantic,
        keyword, graph, temporal) that found its best facts, with their ranks, those facts
        (sentences of the doc), the date they carry and, for the best one, its cosine to the
        query. Read from one recall as retrieve runs it, so it names what really ranked."""
        self._catch_up()
        wanted = max(5 * len(docs), self.options.candidate_pool)
        hits = recall_mod.recall(self, query, wanted).hits
        hashes = {text_hash(d): d for d in docs}
        with self.bank.read() as conn:
            ids = {r[0]: hashes[r[1]] for r in conn.execute(
                f"SELECT id, text_hash FROM documents WHERE text_hash IN {in_clause(list(hashes))}",
                list(hashes))} if hashes else {}
        per_doc: dict[str, list[recall_mod.Hit]] = {}
        for hit in hits:
            if hit.doc_id in ids:
                per_doc.setdefault(ids[hit.doc_id], []).append(hit)
        qvec = self.query_vector(retrieval.bm25.without_paths(query)) if per_doc else None
        vectors: dict[int, Any] = {}
        if qvec is not None:
            with self.bank.read() as conn:
                vectors = self.bank.vectors(conn, [found[0].id for found in per_doc.values()])
        out: list[dict[str, Any]] = []
        for doc in docs:
            found = per_doc.get(doc, [])
            if not found:
                out.append({})
                continue
            strategies: dict[str, int] = {}
            for hit in found:
                for name, rank in hit.found_by.items():
                    strategies[name] = min(rank, strategies.get(name, rank))
            signals: dict[str, Any] = {"strategies": strategies,
                                       "facts": [h.text for h in found[:2]]}
            best = found[0]
            signals["date"] = best.start if best.dated else best.mentioned_at
            if best.id in vectors:
                signals["similarity"] = float(vectors[best.id] @ qvec)
            out.append(signals)
        return out

    def _rebuilt_store(self) -> Any:  # rebuild_in_place and CatchesUp (backends.rederive)
        return self.bank

    def _rederive(self, conn: Any, keys: list[int]) -> None:
        """CatchesUp: each document another program wrote removed with its facts (their
        entities, links, observations, vectors and keyword rows) and, when its row is there,
        retained again at its event time, with its tags and source (its key too, unless the
        key was its old text's hash: then its text now names it)."""
        rows: dict[int, tuple[Any, ...]] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            rows.update((int(r[0]), tuple(r[1:])) for r in conn.execute(
                "SELECT id, text, event_time, key, text_hash, source, tags FROM documents WHERE id "
                f"IN {in_clause(chunk)}", chunk))
        touched: list[int] = []
        for doc_id in keys:
            facts = [r[0] for r in conn.execute("SELECT id FROM facts WHERE doc_id = ?", (doc_id,))]
            remove_facts(self, conn, facts, touched)
            conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
        if touched:
            self.bank.bump(conn, touched)
        items = []
        for doc_id in keys:
            if doc_id not in rows:
                continue
            text, when, key, held_hash, source, tags = rows[doc_id]
            try:
                tag_list = check_tags(json.loads(tags))
            except (TypeError, ValueError):
                tag_list = []
            items.append(RetainItem(str(text), float(when), tag_list,
                                    None if key == held_hash else str(key), str(source)))
        log.info("caught up on %d document(s) another program wrote in %s", len(keys), self.bank.path)
        self._retain(items)

    def delete(self, docs: list[str]) -> int:
        docs = check_texts(docs, "docs")
        self._catch_up()
        hashes = list(dict.fromkeys(text_hash(d) for d in docs))
        if not hashes:
            return 0
        with self.bank.write() as conn:
            rows = conn.execute(f"SELECT id, text_hash FROM documents WHERE text_hash IN "
                                f"{in_clause(hashes)}", hashes).fetchall()
            touched: list[int] = []
            for doc_id, _ in rows:
                facts = [r[0] for r in conn.execute("SELECT id FROM facts WHERE doc_id = ?", (doc_id,))]
                remove_facts(self, conn, facts, touched)
                conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
            if rows:
                self.bank.bump(conn, touched)
        return len({h for _, h in rows})


    def observe_round(self, conversation_id: str, prompt: str, response: str) -> None:
        lifecycle.observe_round(self, conversation_id, prompt, response)

    def agent_context(self) -> str:
        self._catch_up()
        self._refresh_if_due()
        return reflect_mod.agent_context(self)

    def close(self) -> None:
        self.bank.close()


def _check_time(timestamp: Any) -> float | None:
    if timestamp is None:
        return None
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)) or timestamp != timestamp \
            or abs(timestamp) == float("inf"):
        raise ValueError(f"timestamp must be finite unix seconds, got {timestamp!r}")
    return float(timestamp)


__all__ = ["HindsightBackend"]
