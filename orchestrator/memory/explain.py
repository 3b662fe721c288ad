"""Why a memory was recalled, in a line a person reads.

The signals: the query's words the doc shares (stems, so "sessions" matches "session"), the
backend's own (`MemoryBackend.explain`: the BM25 score of bm25 and hybrid, vector similarity,
the graph path of hipporag's entities and facts, the strategies of hindsight's recall that found
the doc's facts, sliding_window's summary, the doc's date), and what people did (pinned,
superseded by a newer doc, recent work).
`middle memory search --explain`, the board's search and the log of every turn show them.
"""

from __future__ import annotations

import re
import time
from typing import Any, Mapping

from orchestrator.memory.format import DOC_ID_CHARS, doc_id

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]+")
# Words every ticket and chat has: sharing them says nothing.
_COMMON = frozenset("""the and for with that this from into have has was were are not but you your
our can will when then than them they its it's also use used using add added fix fixed make made
new now one two all any some more most only just should would could does did done been being
ticket changed change changes""".split())
MAX_KEYWORDS = 6


def _stem(word: str) -> str:
    """A crude stem (enough to say "sessions" and "session" are one word)."""
    word = word.lower()
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def matched_keywords(query: str, doc: str) -> list[str]:
    """The query's distinctive words the doc shares, in the query's order (at most a few)."""
    in_doc = {_stem(w) for w in _WORD.findall(doc)}
    found: list[str] = []
    for word in _WORD.findall(query):
        low = word.lower()
        if len(low) < 3 or low in _COMMON or low in found:
            continue
        if _stem(low) in in_doc:
            found.append(low)
    return found[:MAX_KEYWORDS]


def _age(when: float, now: float) -> str:
    days = (now - when) / 86400
    date = time.strftime("%Y-%m-%d", time.gmtime(when))
    if days < 1:
        return f"{date} (today)"
    return f"{date} ({days:.0f} day{'s' if round(days) != 1 else ''} ago)"


def why_line(signals: Mapping[str, Any], now: float | None = None) -> str:
    """The signals of one recalled memory as one line, most telling first."""
    now = time.time() if now is None else now
    parts = []
    if signals.get("recent"):
        parts.append(str(signals["recent"]))
    if signals.get("pinned"):
        parts.append("pinned")
    if signals.get("strategies"):
        parts.append("found by " + ", ".join(f"{name} (#{rank})" for name, rank in
                                             sorted(signals["strategies"].items(), key=lambda x: x[1])))
    if signals.get("rerank"):  # it set the order: before the signals it reordered
        parts.append(str(signals["rerank"]))
    if signals.get("keywords"):
        parts.append("keywords " + ", ".join(signals["keywords"]))
    if isinstance(signals.get("bm25"), (int, float)):
        parts.append(f"bm25 {signals['bm25']:.2f}" if signals["bm25"] > 0
                     else "bm25: shares no query word")
    if isinstance(signals.get("similarity"), (int, float)):
        parts.append(f"similarity {signals['similarity']:.2f}")
    if signals.get("graph"):
        parts.append("graph: the query names " + ", ".join(f"`{n}`" for n in signals["graph"])
                     + ", which this doc mentions")
    if signals.get("facts"):
        parts.append("facts: " + "; ".join(f'"{fact}"' for fact in signals["facts"]))
    if signals.get("burst"):
        parts.append(str(signals["burst"]))
    if signals.get("issue"):
        parts.append(str(signals["issue"]))
    if signals.get("thread_words"):
        parts.append(str(signals["thread_words"]))
    if signals.get("recency"):
        parts.append(str(signals["recency"]))
    if isinstance(signals.get("date"), (int, float)):
        parts.append(_age(float(signals["date"]), now))
    if signals.get("summary"):
        parts.append(str(signals["summary"]))
    if signals.get("supersedes"):
        parts.append(f"supersedes {signals['supersedes']}"
                     + (", which matched the query: shown as its replacement" if signals.get("brought_in") else ""))
    if signals.get("superseded_by"):
        parts.append(f"superseded by {signals['superseded_by']} (kept as history)")
    return "; ".join(parts) or "ranked by the backend (no shared words)"


def signals_for(query: str, result: Mapping[str, Any], backend_signals: list[dict[str, Any]],
                states: Mapping[str, Any], recall: str = "relevance",
                idents: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Each doc of a retrieve result with its signals (see why_line). `idents`: the id each
    doc is shown by where longer than DOC_ID_CHARS (two docs share those), so a supersede
    link a person reads names one doc."""
    docs = list(result.get("docs", []))

    def ident(doc: str) -> str:
        return (idents or {}).get(doc) or doc_id(doc)[:DOC_ID_CHARS]

    marks = {m["doc"]: m["by"] for m in result.get("superseded", [])}
    marked_by = {m["by"]: m["doc"] for m in result.get("superseded", [])}
    by_hand = {m["by"] for m in result.get("superseded", []) if m.get("by_hand")}
    out = []
    for pos, doc in enumerate(docs):
        signals: dict[str, Any] = dict(backend_signals[pos]) if pos < len(backend_signals) else {}
        signals["keywords"] = matched_keywords(query, doc)
        state = states.get(doc_id(doc))
        if state is not None and state.get("pinned"):
            signals["pinned"] = True
        if pos in marks:
            signals["superseded_by"] = ident(docs[marks[pos]])
        if pos in marked_by:
            signals["supersedes"] = ident(docs[marked_by[pos]])
            # people's replacement, placed by the doc it replaces rather than by the query
            signals["brought_in"] = pos in by_hand
        if recall == "recency":
            signals.setdefault("recency", "recalled by recency (the newest work), not by the query")
        out.append(signals)
    return out
