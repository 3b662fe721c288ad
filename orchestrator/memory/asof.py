"""`middle memory search QUERY --as-of DATE`: what memory said then.

The docs memory held at that date and had not superseded, deleted or let expire by then
(memory.timeline rebuilds them from the curation record and the tickets' records), ranked as
the backend ranks them now: a doc still held at its rank, an edited one at the rank of its
text now; a doc no longer held (deleted, reverted) after those, by the query words it shares.
A recency backend's answer is the newest of them, newest first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.memory.bulk import entered_at
from orchestrator.memory.explain import matched_keywords
from orchestrator.memory.timeline import memory_at, parse_when
from orchestrator.plugins.memory_backend import RetrieveResult

if TYPE_CHECKING:
    from orchestrator.memory.curation import Curator

MAX_RANKED = 10_000  # docs the backend ranks for one as-of search (the facade's own cap)


def search_as_of(curator: Curator, project_id: str, query: str, when: str, k: int
                 ) -> tuple[str, int, RetrieveResult]:
    """(the instant `when` names, how many docs memory held then, the best k of them)."""
    at = parse_when(when, "--as-of", end_of_day=True)
    facade, store = curator.facade, curator.store
    (query,) = facade.check_queries([query])
    docs_now = facade.list_docs(project_id)
    states = curator.states(project_id)
    sources = store.doc_sources(project_id)
    entered: dict[str, str | None] = {text: entered_at(text, states, sources.get(text, []))
                                      for text in docs_now}
    now = set(docs_now)
    reverted = [(doc, s["indexed_at"], s["deleted_at"] or "") for doc, records in sources.items()
                if doc not in now for s in records if s.get("deleted_at")]
    changes = store.memory_changes(project_id, limit=1_000_000)
    then = memory_at(at, docs_now, states, changes, entered, reverted)
    held = then.held(at)
    empty: RetrieveResult = {"question": query, "docs": [], "doc_scores": []}
    if not held:
        return at, 0, empty
    if facade.backend_cls.recall == "recency":
        def entry(text: str) -> str:
            now_text: str = then.successor.get(text, text)
            return entered.get(now_text) or ""

        newest = sorted(held, key=entry, reverse=True)
        return at, len(held), {"question": query, "docs": newest[:k], "doc_scores": [1.0] * len(newest[:k])}
    with facade.using(project_id, "retrieve") as backend:
        (ranked,) = backend.retrieve([query], min(max(len(docs_now), 1), MAX_RANKED))
    rank = {doc: (pos, score) for pos, (doc, score) in enumerate(zip(ranked["docs"], ranked["doc_scores"]))}
    placed = []
    for text in held:
        found = rank.get(then.successor.get(text, text))
        if found is not None:
            placed.append((0, found[0], -found[1], text, found[1]))
        elif (shared := len(matched_keywords(query, text))) > 0:
            placed.append((1, -shared, 0.0, text, 0.0))
    placed.sort(key=lambda p: p[:3])
    best = placed[:k]
    return at, len(held), {"question": query, "docs": [p[3] for p in best],
                           "doc_scores": [float(p[4]) for p in best]}
