"""The sliding-window memory backend: rolling incremental summaries."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from pydantic import Field, ValidationError

from backends.common import SharesDatabase
from backends.rederive import CatchesUp, RebuildsInPlace
from backends.storage import salvage_rows, warn_outside_writes
from orchestrator.plugin_api import (
    BackendOptions,
    ConfigError,
    ConversationContext,
    MemoryBackend,
    MemoryDatabase,
    MemoryRecord,
    MemoryStoreError,
    RetrieveResult,
    TextLLM,
    check_texts,
    shortest_unique,
)

from . import store as q
from .store import PROJECT_CONVERSATION, open_store
from .summarizer import Summarizer
from .window import doc_window, window_range

log = logging.getLogger("middle.memory.sliding_window")

DB_NAME = "sliding_window.sqlite3"
CURATION_META = "curation"  # meta key: what people said of the docs (doc hash -> note)


class SlidingWindowOptions(BackendOptions):
    """Options of the sliding_window backend (`[memory.options]` in middle.toml)."""

    window_size: int = Field(14, ge=2, description="messages (or docs) a summary covers")
    summarize_after_seq: int = Field(5, ge=0, description="first seq that triggers a summary")
    processing_timeout_s: float = Field(300, gt=0, description="age at which a run counts failed")
    max_summary_chars: int = Field(4000, ge=200, description="longest summary kept")
    background: bool = Field(True, description="summarise in a background thread")


class SlidingWindowBackend(SharesDatabase, CatchesUp, RebuildsInPlace, MemoryBackend):
    """Rolling summaries of the ticket conversation and of the project's completed-ticket docs."""

    name = "sliding_window"
    description = "Rolling incremental summaries over a sliding window of recent messages and docs."
    Options = SlidingWindowOptions
    store_files = (DB_NAME,)

    @classmethod
    def salvage_records(cls, store_dir: Path) -> list[tuple[str, float | None]]:
        # The project's docs are the messages of its project conversation (see index).
        return salvage_rows(Path(store_dir) / DB_NAME, "messages", ("text", "created_at"),
                            f"conversation_id = '{PROJECT_CONVERSATION}'")
    recall = "recency"  # retrieve returns the newest summary and docs, whatever the query
    keeps_times = True  # a doc is placed in the window by its own time (an edit keeps it)

    def __init__(
        self,
        store_dir: Path,
        options: BackendOptions | dict[str, Any] | None = None,
        llm: TextLLM | None = None,
        *,
        database: MemoryDatabase | None = None,
    ):
        super().__init__(store_dir, _coerce_options(options), llm)
        self.options: SlidingWindowOptions
        self.database = database
        self._store = open_store(self.store_dir / DB_NAME, database)
        try:
            warn_outside_writes(self._store, self.name, "summaries", log)
        except BaseException:
            self._store.close()
            raise
        self._summarizer = Summarizer(llm, self.options.max_summary_chars)
        self._threads: set[threading.Thread] = set()
        self._threads_lock = threading.Lock()
        self._clock = time.time  # wall clock: processing rows may come from another process
        self._rekeyed = False  # set by _rederive: a summary is due once its write commits

    # --- ticket conversation -------------------------------------------------------------

    def observe_round(self, conversation_id: str, prompt: str, response: str) -> None:
        """Save one round (prompt then response) and summarise if the window says so."""
        _check_conversation_id(conversation_id)
        with self._store.tx() as conn:
            if q.last_messages(conn, conversation_id, 2) == [("prompt", prompt), ("response", response)]:
                # Given already: a run killed after giving it and before recording that gives it
                # again on takeover (orchestrator.graph.nodes._observe); one round is kept once.
                return
            q.append_messages(
                conn, conversation_id, [("prompt", prompt), ("response", response)], self._clock()
            )
        self._maybe_summarize(conversation_id)

    def conversation_context(self, conversation_id: str) -> ConversationContext:
        """Latest completed summary plus the messages after it, or every message when none."""
        _check_conversation_id(conversation_id)
        with self._store.read() as conn:
            latest = q.latest_completed(conn, conversation_id)
            if latest is None:
                everything = q.messages(conn, conversation_id)
                return ConversationContext(summary=None, gap_messages=everything)
            gap = q.messages(conn, conversation_id, latest["end_sequence"] + 1)
        return ConversationContext(summary=latest["memory_text"], gap_messages=gap)

    def summaries(self, conversation_id: str | None = None) -> list[dict[str, Any]]:
        """Every summary row (the version chain) of a conversation, oldest first; None = project."""
        cid = PROJECT_CONVERSATION if conversation_id is None else conversation_id
        with self._store.read() as conn:
            return q.memory_rows(conn, cid)

    # --- project memory ------------------------------------------------------------------

    def index(self, docs: list[str]) -> None:
        """Append new docs to the project conversation (exact duplicates are skipped)."""
        self._catch_up()
        check_texts(docs)
        self._add([(doc, None) for doc in docs])

    def index_records(self, records: Sequence[MemoryRecord]) -> None:
        """Add docs at their own times (an edit, an undo, a reindex): each takes its place in
        the window by time, not at the newest end."""
        self._catch_up()
        check_texts([r.text for r in records])
        self._add([(r.text, r.timestamp) for r in records])

    def _add(self, items: list[tuple[str, float | None]]) -> None:
        added = 0
        with self._store.tx() as conn:
            for doc, when in items:
                if when is None:
                    added += q.add_doc(conn, PROJECT_CONVERSATION, doc, self._clock())
                else:
                    added += q.add_doc_at(conn, PROJECT_CONVERSATION, doc, float(when))
        log.debug("Indexed %d new of %d docs in %s", added, len(items), self._store.path)
        if added:
            self._maybe_summarize(PROJECT_CONVERSATION)

    def list_records(self) -> list[tuple[str, float | None]]:  # as they are: see DocumentListing
        with self._store.read() as conn:
            return list(q.records(conn, PROJECT_CONVERSATION))

    def retrieve(self, queries: list[str], num_to_retrieve: int) -> list[RetrieveResult]:
        """Recency, not relevance: every query gets the same memory, whatever its words.

        Each result is the docs the latest completed project summary does not cover yet,
        newest first, then that summary (its lines newest first, each naming its doc's id,
        with what people said of it), at most num_to_retrieve items in all: a reader that
        cuts the list short (the agent's block) cuts the oldest work. Scores are all 1.0
        because nothing is ranked.
        """
        self._catch_up()
        if not queries:
            return []
        with self._store.read() as conn:
            latest = q.latest_completed(conn, PROJECT_CONVERSATION)
            after = latest["end_sequence"] + 1 if latest else 0
            pending = [m["text"] for m in q.messages(conn, PROJECT_CONVERSATION, after)]
        k = max(0, num_to_retrieve)
        room = k - (1 if latest is not None and k else 0)
        items = list(reversed(pending))[:room] if room > 0 else []
        if k and latest is not None:
            items.append(latest["memory_text"])
        return [
            {"question": query, "docs": list(items), "doc_scores": [1.0] * len(items)}
            for query in queries
        ]

    def apply_curation(self, notes: Mapping[str, str]) -> None:
        """People's marks (superseded, expired, pinned) as the project summary shows them:
        when they changed, every project summary is rebuilt with them (a superseded doc's
        line says by which, an expired doc has none), so a fix reaches the next ticket."""
        self._catch_up()
        wanted = {q.doc_hash(doc): note for doc, note in sorted(notes.items())}
        with self._store.tx() as conn:
            if self._store.meta_json(conn, CURATION_META, {}) == wanted:
                return
            self._store.set_meta(conn, CURATION_META, json.dumps(wanted, sort_keys=True))
            stale = q.invalidate_all(conn, PROJECT_CONVERSATION)
        log.info("Curation changed: project summaries %s rebuilt", stale)
        self._maybe_summarize(PROJECT_CONVERSATION)

    def derived_texts(self) -> list[tuple[str, str]]:
        """The project summaries `retrieve` can show (every completed one, newest first: a
        block shown before the latest was built names an older one), each with its docs."""
        self._catch_up()
        out = []
        with self._store.read() as conn:
            rows = q.memory_rows(conn, PROJECT_CONVERSATION, status="completed")
            for row in reversed(rows):
                covered = q.messages(conn, PROJECT_CONVERSATION, row["start_sequence"],
                                     row["end_sequence"])
                ids = ", ".join(q.doc_hash(m["text"])[:8] for m in reversed(covered))
                out.append((row["memory_text"], f"a rolling summary by sliding_window of "
                            f"{len(covered)} docs, newest first: {ids}"))
        return out

    def explain(self, query: str, docs: Sequence[str]) -> list[dict[str, Any]]:
        """Each doc's date; the summary says it is one, and of how many docs."""
        self._catch_up()
        derived = dict(self.derived_texts())
        with self._store.read() as conn:
            times = dict(q.records(conn, PROJECT_CONVERSATION))
        out: list[dict[str, Any]] = []
        for doc in docs:
            if doc in derived:
                out.append({"summary": derived[doc].split(":")[0] + " (its lines name them)"})
            else:
                out.append({"date": times[doc]} if doc in times else {})
        return out

    # --- rebuild_in_place (backends.rederive) ---------------------------------------------------

    def _rebuilt_store(self) -> Any:
        return self._store

    def _rederive(self, conn: Any, keys: list[int]) -> None:
        """CatchesUp: the project docs another program wrote get their keys from their text
        now, and every summary that covered them (or was built on one that did) is made stale,
        so the next summary is made from the docs as they are (rebuilt once this write commits:
        _catch_up)."""
        stale = q.rekey(conn, PROJECT_CONVERSATION, keys)
        log.info("caught up on %d project doc(s) another program wrote in %s; summaries %s rebuilt",
                 len(keys), self._store.path, stale)
        self._rekeyed = True

    def _catch_up(self) -> None:
        super()._catch_up()
        if self._rekeyed:
            self._rekeyed = False
            self._maybe_summarize(PROJECT_CONVERSATION)

    def _repair_keys(self, conn: Any) -> None:
        """The docs' keys from the project's messages again: a message written by hand has
        none (the first of a text written twice gets it)."""
        conn.execute("DELETE FROM docs")
        keys: dict[str, int] = {}
        for seq, text in conn.execute("SELECT seq, text FROM messages WHERE conversation_id = ? "
                                      "ORDER BY seq", (PROJECT_CONVERSATION,)).fetchall():
            keys.setdefault(q.doc_hash(text), seq)
        conn.executemany("INSERT INTO docs (doc_hash, seq) VALUES (?, ?)", list(keys.items()))

    def _drop_leftovers(self, conn: Any) -> None:
        conn.execute("DELETE FROM messages WHERE conversation_id = ?", (PROJECT_CONVERSATION,))

    def delete(self, docs: list[str]) -> int:
        """Remove docs by exact text and invalidate every summary that could still quote them."""
        self._catch_up()
        check_texts(docs)
        removed: list[int] = []
        with self._store.tx() as conn:
            for doc in dict.fromkeys(docs):
                seq = q.remove_doc(conn, PROJECT_CONVERSATION, doc)
                if seq is not None:
                    removed.append(seq)
            stale = q.invalidate_covering(conn, PROJECT_CONVERSATION, removed) if removed else []
        if stale:
            log.info("Deleted %d docs; summaries %s marked stale", len(removed), stale)
        if removed:
            self._maybe_summarize(PROJECT_CONVERSATION)
        return len(removed)

    def list_docs(self) -> list[str]:
        self._catch_up()
        with self._store.read() as conn:
            return [m["text"] for m in q.messages(conn, PROJECT_CONVERSATION)]

    def has_doc(self, doc: str) -> bool:
        self._catch_up()
        with self._store.read() as conn:
            return q.has_doc(conn, doc)

    def docs_by_id(self, prefix: str) -> list[str]:
        self._catch_up()
        with self._store.read() as conn:
            return q.docs_with_hash_prefix(conn, PROJECT_CONVERSATION, prefix)

    def doc_time(self, doc: str) -> float | None:
        self._catch_up()
        with self._store.read() as conn:
            return q.doc_time(conn, PROJECT_CONVERSATION, doc)

    def fingerprint(self) -> str | None:
        """How many docs, the newest and the sum of their places in the conversation (an
        add or a delete moves them; docs put back in time order are renumbered, so the sum
        too) and how many writes of their text or time the store counted (q.COUNTED: by
        triggers, so a doc rewritten in place by any tool moves it too): summaries and
        watched rounds do not change it."""
        self._catch_up()
        with self._store.read() as conn:
            count, newest, total = conn.execute(
                "SELECT COUNT(*), COALESCE(MAX(seq), 0), COALESCE(SUM(seq), 0) FROM docs").fetchone()
            writes = self._store.doc_writes(conn)
        return f"{count}:{newest}:{total}:{writes}"

    # --- lifecycle -----------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Wait for running summaries; with a timeout, give up after that many seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._threads_lock:
            running = list(self._threads)
        for thread in running:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(left)

    def close(self) -> None:
        """Wait (bounded by processing_timeout_s) for summaries, then close the database."""
        if self._store.closed:
            return
        self.flush(self.options.processing_timeout_s)
        self._store.close()

    # --- summarisation -------------------------------------------------------------------

    def _maybe_summarize(self, cid: str) -> None:
        """The trigger: enough messages and no summary in progress → start one."""
        opts = self.options
        now = self._clock()
        with self._store.tx() as conn:
            for row in q.memory_rows(conn, cid, status="processing"):
                if now - row["created_at"] <= opts.processing_timeout_s:
                    log.debug("Summarization already in progress for %s", cid)
                    return
                # Its thread died or hangs (or its process is gone): give up on it and go on.
                q.finish(conn, row["memory_id"], "failed")
                log.warning(
                    "Memory %d for %s was processing for %.0fs; marked failed",
                    row["memory_id"], cid, now - row["created_at"],
                )
            if cid == PROJECT_CONVERSATION:
                seqs = q.live_seqs(conn, cid)
                if len(seqs) - 1 < opts.summarize_after_seq:
                    return
                start, end = doc_window(seqs, opts.window_size)
            else:
                seqs = q.live_seqs(conn, cid)
                if not seqs or seqs[-1] < opts.summarize_after_seq:
                    return
                start, end = window_range(seqs[-1], opts.window_size)
            base = q.latest_completed(conn, cid)
            if base is not None and base["end_sequence"] >= end:
                log.debug("No new messages to summarize for %s", cid)
                return
            base_id = base["memory_id"] if base else None
            memory_id = q.insert_processing(conn, cid, start, end, base_id, now)
        if start > 0:
            log.info("Sliding window: dropping seq 0-%d for %s", start - 1, cid)
        job = (memory_id, cid, start, end, base_id)
        if not opts.background:
            self._summarize(*job)
            return
        thread = threading.Thread(
            target=self._summarize, args=job, name=f"sliding-window-{memory_id}", daemon=True
        )
        with self._threads_lock:
            self._threads.add(thread)
        thread.start()

    def _summarize(
        self, memory_id: int, cid: str, start: int, end: int, base_id: int | None
    ) -> None:
        """Build one summary incrementally from its base; mark the row completed or failed."""
        started = time.perf_counter()
        try:
            with self._store.read() as conn:
                base = q.get_memory(conn, base_id) if base_id is not None else None
                new_from = max(start, base["end_sequence"] + 1) if base else start
                new_messages = q.messages(conn, cid, new_from, end)
                window_messages = q.messages(conn, cid, start, end)
                if cid == PROJECT_CONVERSATION:
                    notes = self._store.meta_json(conn, CURATION_META, {})
                    new_messages = _labelled(conn, new_messages, notes)
                    window_messages = _labelled(conn, window_messages, notes)
            text = self._summarizer.summarize(
                kind="project" if cid == PROJECT_CONVERSATION else "conversation",
                previous=base["memory_text"] if base else None,
                previous_end=base["end_sequence"] if base else None,
                new_messages=new_messages,
                window_messages=window_messages,
                window_start=start,
                label=f"{cid} seq {start}-{end}",
            )
            elapsed_ms = int((time.perf_counter() - started) * 1000)
            with self._store.tx() as conn:
                done = q.finish(conn, memory_id, "completed", text, elapsed_ms)
            if done:
                log.info("Summarized messages %d-%d for %s in %dms", start, end, cid, elapsed_ms)
                log.debug("Memory %d status updated to completed", memory_id)
            else:
                log.debug("Memory %d was marked failed or stale meanwhile; dropped", memory_id)
        except Exception as exc:
            if self._store.closed:
                return  # closed under us (close() timed out): nothing left to record into
            log.warning(
                "Summarizing messages %d-%d for %s failed: %s", start, end, cid, exc, exc_info=True
            )
            try:
                with self._store.tx() as conn:
                    q.finish(conn, memory_id, "failed")
                log.debug("Memory %d status updated to failed", memory_id)
            except MemoryStoreError:
                pass  # the stale-row check turns it into failed after processing_timeout_s
        finally:
            with self._threads_lock:
                self._threads.discard(threading.current_thread())


def _labelled(conn: Any, messages: list[dict[str, Any]], notes: Mapping[str, str]) -> list[dict[str, Any]]:
    """Project docs named by their ids (what `middle memory show` takes: 8 characters, or as
    many more as tell it from another doc whose id starts alike) with what people said of
    them; an expired doc is left out of the summary."""
    out = []
    for m in messages:
        key = q.doc_hash(m["text"])
        note = notes.get(key)
        if note == "expired":
            continue
        out.append({**m, "label": _short_id(conn, key) + (f", {note}" if note else "")})
    return out


def _short_id(conn: Any, key: str) -> str:
    """The doc's id as far as tells it from every other project doc (a range of the docs' key)."""
    alike = q.docs_with_hash_prefix(conn, PROJECT_CONVERSATION, key[:8])
    return shortest_unique(key, [q.doc_hash(text) for text in alike])


def _coerce_options(options: BackendOptions | dict[str, Any] | None) -> SlidingWindowOptions:
    if isinstance(options, SlidingWindowOptions):
        return options
    raw = options.model_dump() if isinstance(options, BackendOptions) else dict(options or {})
    try:
        return SlidingWindowOptions.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"Invalid [memory.options] for sliding_window: {exc}") from exc


def _check_conversation_id(conversation_id: str) -> None:
    if not isinstance(conversation_id, str) or not conversation_id:
        raise ValueError("conversation_id must be a non-empty string")
    if conversation_id == PROJECT_CONVERSATION:
        raise ValueError(f"{PROJECT_CONVERSATION!r} is reserved for project docs")
