"""`middle bench tickets`: replay a ticket history through backends as the ticket workflow does."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Sequence

from orchestrator.errors import ConfigError
from orchestrator.memory.facade import DEFAULT_MEMORIES_BUDGET_CHARS, memories_layout
from orchestrator.memory.format import (
    DEFAULT_RECENT_SHARE,
    DEFAULT_RECENT_TICKETS,
    DEFAULT_RELATED_WINDOW,
    Block,
    block_layout,
)

from . import ticket_data
from .metrics import interval95, mean, percentile
from .runner import Bench, Progress, no_progress

K = 10  # recall@10 and MRR@10 need ten; the agent is shown the first NUM_SHOWN
NUM_SHOWN = 5  # [memory] num_to_retrieve's default: what recall at ticket start returns
QUERY_KINDS = ("start", "turn")
WINDOW = 20  # long-range: relevant tickets older than the newest WINDOW (what a window cannot hold)


def select(history: ticket_data.TicketHistory, last: int | None,
           before_last: int | None) -> list[ticket_data.HistoryTicket]:
    """The tickets to replay: without the newest `before_last` (a development split), then the
    newest `last` of what remains."""
    tickets = history.tickets
    for value, option in ((last, "--last"), (before_last, "--before-last")):
        if value is not None and value < 1:
            raise ConfigError(f"{option} must be at least 1, not {value}")
    if before_last:
        if before_last >= len(tickets):
            raise ConfigError(f"--before-last {before_last} leaves nothing of {len(tickets)} tickets")
        tickets = tickets[:-before_last]
    if last:
        tickets = tickets[-last:]
    return tickets


def relevant_earlier(tickets: Sequence[ticket_data.HistoryTicket]) -> list[set[int]]:
    """For each ticket, the positions of earlier tickets sharing an issue reference."""
    by_ref: dict[int, list[int]] = {}
    out = []
    for pos, ticket in enumerate(tickets):
        out.append({p for ref in ticket.refs for p in by_ref.get(ref, ())})
        for ref in dict.fromkeys(ticket.refs):
            by_ref.setdefault(ref, []).append(pos)
    return out


class Owners:
    """Which replayed tickets a returned memory stands for: a stored doc stands for the tickets
    that indexed it; a memory that is no stored doc (sliding_window's summary of its window)
    stands for the tickets whose docs it quotes, each known by its head (its first sentence,
    as the offline summary quotes it, at most HEAD characters)."""

    HEAD = 60

    def __init__(self) -> None:
        self.docs: dict[str, set[int]] = {}  # doc text -> ticket positions (equal docs: all)
        self._heads: dict[str, set[int]] = {}
        self._quoted: dict[str, list[set[int]]] = {}  # memory text -> the docs it quotes

    def add(self, doc: str, pos: int) -> None:
        self.docs.setdefault(doc, set()).add(pos)
        self._heads.setdefault(doc.split(". ", 1)[0][:self.HEAD], set()).add(pos)
        self._quoted.clear()

    def quoted(self, text: str) -> list[set[int]]:
        """The tickets of each stored doc a memory is or quotes (one set per doc)."""
        if text in self.docs:
            return [self.docs[text]]
        if text not in self._quoted:
            self._quoted[text] = [pos for head, pos in self._heads.items() if head and head in text]
        return self._quoted[text]

    def of(self, text: str) -> set[int]:
        return set().union(*self.quoted(text))

    def relevant_share(self, text: str, relevant: set[int]) -> float:
        """The share of a memory that is about relevant tickets: 1 or 0 for a doc, the share
        of the docs it quotes for a summary."""
        quoted = self.quoted(text)
        return sum(1 for pos in quoted if pos & relevant) / len(quoted) if quoted else 0.0


def block_precision(docs: list[str], owners: Owners, relevant: set[int],
                    budget: int) -> float | None:
    """Share of the "Memories invoked" block's characters (built by the facade's own budget
    code) that belong to relevant docs; None when the block is empty."""
    layout = memories_layout(docs, budget)
    total = sum(len(text) for _, text in layout)
    if not total:
        return None
    good = sum(len(text) * owners.relevant_share(docs[i], relevant)
               for i, text in layout if i is not None)
    return good / total


class _Scores:
    """Per query kind: the ranking metrics of scored tickets and every retrieve's latency."""

    def __init__(self) -> None:
        self.recall5: list[float] = []
        self.recall10: list[float] = []
        self.hit5: list[float] = []
        self.mrr10: list[float] = []
        self.precision: list[float] = []
        self.latency: list[float] = []
        self.cpu: list[float] = []
        self.long_recall5: list[float] = []
        self.long_hit5: list[float] = []

    def add_long(self, ranked: list[set[int]], long: set[int]) -> None:
        """A ticket's long-range relevant tickets (older than the window) against its ranking."""
        found5 = set().union(*ranked[:5]) & long
        self.long_recall5.append(len(found5) / len(long))
        self.long_hit5.append(1.0 if found5 else 0.0)

    def add(self, ranked: list[set[int]], relevant: set[int], precision: float | None) -> None:
        found5 = set().union(*ranked[:5]) & relevant
        found10 = set().union(*ranked[:10]) & relevant
        self.recall5.append(len(found5) / len(relevant))
        self.recall10.append(len(found10) / len(relevant))
        self.hit5.append(1.0 if found5 else 0.0)
        first = next((r for r, owners in enumerate(ranked[:10], start=1) if owners & relevant), None)
        self.mrr10.append(1.0 / first if first else 0.0)
        if precision is not None:
            self.precision.append(precision)

    def add_block(self, block: Block, owners: Owners, relevant: set[int], long: set[int]) -> None:
        """The whole "Memories invoked" block as the agent is shown it: recall counts every
        ticket it shows (its recent lines and its related docs, as sliding_window's summary
        counts every ticket it quotes), so R@5 and R@10 are the same; MRR reads it in order."""
        shown = [owners.of(doc) for doc, _ in block.parts[:1 + block.recent_shown] if doc]
        shown += [owners.of(doc) for doc in block.related]
        found = set().union(*shown) & relevant
        self.recall5.append(len(found) / len(relevant))
        self.recall10.append(self.recall5[-1])
        self.hit5.append(1.0 if found else 0.0)
        first = next((r for r, tickets in enumerate(shown, start=1) if tickets & relevant), None)
        self.mrr10.append(1.0 / first if first else 0.0)
        total = sum(len(text) for _, text in block.parts)
        if total:
            self.precision.append(sum(len(text) * owners.relevant_share(doc, relevant)
                                      for doc, text in block.parts if doc) / total)
        if long:
            found_long = set().union(*shown) & long
            self.long_recall5.append(len(found_long) / len(long))
            self.long_hit5.append(1.0 if found_long else 0.0)

    def row(self) -> dict[str, Any]:
        return {"recall@5": mean(self.recall5), "recall@10": mean(self.recall10),
                "hit@5": mean(self.hit5), "mrr@10": mean(self.mrr10),
                "block_precision": mean(self.precision),
                "long_recall@5": mean(self.long_recall5), "long_hit@5": mean(self.long_hit5),
                "long_recall@5_ci95": list(interval95(self.long_recall5)),
                # Per long-range ticket, in order: histories pool by joining these lists.
                "long_recall@5_per_ticket": list(self.long_recall5),
                "long_scored": len(self.long_recall5),
                "retrieve_p50_ms": percentile(self.latency, 50),
                "retrieve_p95_ms": percentile(self.latency, 95),
                "retrieve_cpu_p95_ms": percentile(self.cpu, 95)}


def long_range(relevant: Sequence[set[int]], window: int) -> list[set[int]]:
    """For each ticket, its relevant earlier tickets older than the newest `window` before it."""
    return [{p for p in rel if p < pos - window} for pos, rel in enumerate(relevant)]


def recent_only(tickets: Sequence[ticket_data.HistoryTicket], window: int,
                budget: int) -> dict[str, Any]:
    """The baseline a window gives for free: the `window` newest tickets, newest first, as the
    ranking of every scored ticket (no query, no store)."""
    relevant = relevant_earlier(tickets)
    longs = long_range(relevant, window)
    scores = _Scores()
    owners = Owners()
    docs = [t.completion_doc() for t in tickets]
    for pos, doc in enumerate(docs):
        if relevant[pos]:
            newest = list(range(pos - 1, max(pos - window, 0) - 1, -1))
            ranked = [owners.of(docs[p]) for p in newest]
            shown = [docs[p] for p in newest[:NUM_SHOWN]]
            scores.add(ranked, relevant[pos], block_precision(shown, owners, relevant[pos], budget))
            if longs[pos]:
                scores.add_long(ranked, longs[pos])
        owners.add(doc, pos)
    row = scores.row()
    for key in ("retrieve_p50_ms", "retrieve_p95_ms", "retrieve_cpu_p95_ms", "index_p50_ms",
                "index_p95_ms", "index_cpu_p95_ms"):
        row[key] = float("nan")  # nothing is stored or searched
    return {"backend": f"recent-only ({window} newest)", "query": "none", **row,
            "tickets": len(tickets), "scored": sum(1 for r in relevant if r)}


def replay(bench: Bench, spec: Any, tickets: Sequence[ticket_data.HistoryTicket],
           budget: int, progress: Progress, window: int = WINDOW,
           recent_tickets: int = DEFAULT_RECENT_TICKETS,
           recent_share: float = DEFAULT_RECENT_SHARE,
           related_window: int = DEFAULT_RELATED_WINDOW) -> list[dict[str, Any]]:
    """One backend through the whole history in a fresh store; one result row per query kind,
    one for the related list the agent is given (the start query's ranking without the newest
    `related_window` tickets, as the block builds it) and one for the block the agent is shown
    at ticket start (recent work + related work)."""
    relevant = relevant_earlier(tickets)
    longs = long_range(relevant, window)
    scores = {kind: _Scores() for kind in (*QUERY_KINDS, "related", "block")}
    docs_by_pos = [(t.completion_doc(), t.date) for t in tickets]
    index_ms: list[float] = []
    index_cpu: list[float] = []
    owners = Owners()
    advance = progress(spec.label, len(tickets))
    with bench.scratch() as tmp:
        backend = bench.open(spec, tmp / "store")
        now = [time.time()]
        # The history's own clock: each ticket starts and ends at its date, so a backend's
        # recency means what it would have meant when the work was done.
        backend.clock = lambda: now[0]
        try:
            for pos, ticket in enumerate(tickets):
                now[0] = ticket.timestamp or now[0]
                for kind, query in (("start", ticket.start_query()), ("turn", ticket.turn_query())):
                    started, cpu = time.perf_counter(), time.process_time()
                    (result,) = backend.retrieve([query], K)
                    scores[kind].latency.append((time.perf_counter() - started) * 1000)
                    scores[kind].cpu.append((time.process_time() - cpu) * 1000)
                    if relevant[pos]:
                        docs = result["docs"]
                        ranked = [owners.of(d) for d in docs]
                        scores[kind].add(ranked, relevant[pos], block_precision(
                            docs[:NUM_SHOWN], owners, relevant[pos], budget))
                        if longs[pos]:
                            scores[kind].add_long(ranked, longs[pos])
                if relevant[pos]:
                    _score_block(scores, backend, ticket, pos, docs_by_pos, owners,
                                 (relevant[pos], longs[pos]), budget, recent_tickets, recent_share,
                                 related_window)
                doc = docs_by_pos[pos][0]
                started, cpu = time.perf_counter(), time.process_time()
                backend.index([doc])
                index_ms.append((time.perf_counter() - started) * 1000)
                index_cpu.append((time.process_time() - cpu) * 1000)
                # Background work (sliding_window's summary) finishes before the next ticket
                # starts, as it does between real tickets minutes apart; untimed, and without
                # it the scores hung on thread timing (they moved between runs).
                backend.flush()
                owners.add(doc, pos)
                advance(1)
        finally:
            backend.close()
    # Wall time holds the wait for a core on a shared machine; CPU time is what the call costs.
    index = {"index_p50_ms": percentile(index_ms, 50), "index_p95_ms": percentile(index_ms, 95),
             "index_cpu_p95_ms": percentile(index_cpu, 95)}
    scored = sum(1 for r in relevant if r)
    rows = [{"backend": spec.label, "query": kind, **scores[kind].row(), **index,
             "tickets": len(tickets), "scored": scored} for kind in QUERY_KINDS]
    rows.append({"backend": f"{spec.label} (related)", "query": "start", **scores["related"].row(),
                 **index, "tickets": len(tickets), "scored": scored,
                 "related_window": related_window})
    return rows + [{"backend": f"{spec.label} (block)", "query": "start", **scores["block"].row(),
                    **index, "tickets": len(tickets), "scored": scored,
                    "recent_tickets": recent_tickets, "recent_share": recent_share,
                    "related_window": related_window}]


def _score_block(scores: dict[str, _Scores], backend: Any, ticket: ticket_data.HistoryTicket,
                 pos: int, docs: Sequence[tuple[str, str]], owners: Owners,
                 relevant: tuple[set[int], set[int]], budget: int, recent_tickets: int,
                 recent_share: float, related_window: int) -> None:
    """The start block as the ticket workflow builds it (graph/nodes.py _recall): the newest
    `recent_tickets` docs as recent work, and one retrieve of as many more related docs as
    the newest `related_window` (at least the recent ones) it leaves out, of which the first
    NUM_SHOWN left are shown; that related list is scored on its own too ("related").
    `docs`: each replayed ticket's (completion doc, date)."""
    newest = range(pos - 1, max(pos - recent_tickets, 0) - 1, -1)
    recent = [docs[p] for p in newest]  # (doc, date) pairs, newest first
    window = max(related_window, recent_tickets) if recent_tickets else 0  # as graph/nodes.py
    left_out = {docs[p][0] for p in range(max(pos - window, 0), pos)}
    started, cpu = time.perf_counter(), time.process_time()
    (result,) = backend.retrieve([ticket.start_query()], NUM_SHOWN + len(left_out))
    scores["block"].latency.append((time.perf_counter() - started) * 1000)
    scores["block"].cpu.append((time.process_time() - cpu) * 1000)
    related = [d for d in result["docs"] if d not in left_out]
    ranked = [owners.of(d) for d in related]
    scores["related"].add(ranked, relevant[0], block_precision(related[:NUM_SHOWN], owners,
                                                                relevant[0], budget))
    if relevant[1]:
        scores["related"].add_long(ranked, relevant[1])
    block = block_layout(recent, related, budget, recent_share, limit=NUM_SHOWN, ids=True)
    scores["block"].add_block(block, owners, *relevant)


def run_tickets(*, dataset: Path | None = None, repo: Path | None = None,
                backends: Sequence[str], last: int | None = None,
                before_last: int | None = None, cached_embeddings: bool = False,
                budget_chars: int = DEFAULT_MEMORIES_BUDGET_CHARS, work_dir: Path | None = None,
                progress: Progress = no_progress, window: int = WINDOW,
                recent_tickets: int = DEFAULT_RECENT_TICKETS,
                recent_share: float = DEFAULT_RECENT_SHARE,
                related_window: int = DEFAULT_RELATED_WINDOW,
                doc_refs: bool = False) -> dict[str, Any]:
    """Replay a ticket history (a file, or a git repository's log) through each backend.

    For each ticket in order: recall with its start query and its per-turn query, then index
    its completion doc. A ticket is scored when an earlier one shares an issue reference; its
    long-range scores count only related tickets older than the newest `window`, and a first
    row, recent-only, is the `window` newest tickets, newest first (what a window gives). A
    "(block)" row per backend scores the start block the agent is shown: the newest
    `recent_tickets` tickets as recent work ([memory] recent_tickets, recent_share) and the
    ranked related ones, everything it shows counted.
    Document vectors are embedded inside each index call (as in a real run) unless
    `cached_embeddings`, which reuses the embedding cache for faster reruns. With `doc_refs`
    each completion doc names its ticket's issues (`Issues: #12.`) for every backend; the
    queries never do.
    """
    if (dataset is None) == (repo is None):
        raise ConfigError("give one ticket history: --dataset FILE or --repo PATH")
    if window < 1:
        raise ConfigError(f"--window must be at least 1, not {window}")
    if recent_tickets < 0:
        raise ConfigError(f"--recent-tickets must be at least 0, not {recent_tickets}")
    shared = None if cached_embeddings else {"embedding_cache": False}
    bench = Bench(backends, work_dir, progress, shared_options=shared)  # bad names fail first
    history = (ticket_data.load_ticket_file(dataset) if dataset is not None
               else ticket_data.load_git_repo(repo))  # type: ignore[arg-type]
    tickets = select(history, last, before_last)
    if doc_refs:
        tickets = [dataclasses.replace(t, refs_in_doc=True) for t in tickets]
    results = [recent_only(tickets, window, budget_chars)]
    results += [row for spec in bench.specs
                for row in replay(bench, spec, tickets, budget_chars, progress, window,
                                  recent_tickets, recent_share, related_window)]
    return {"dataset": str(dataset if dataset is not None else repo), "kind": "tickets",
            "name": history.name, "tickets": len(tickets),
            "scored": sum(1 for r in relevant_earlier(tickets) if r),
            "embeddings": "cached" if cached_embeddings else "embedded in each index call",
            "window": window, "long_scored": sum(1 for r in long_range(relevant_earlier(tickets),
                                                                      window) if r),
            "memories_budget_chars": budget_chars, "recent_tickets": recent_tickets,
            "recent_share": recent_share, "related_window": related_window,
            "doc_refs": doc_refs, "results": results}
