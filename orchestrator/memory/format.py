"""The text side of memory: doc ids, the cap on a stored doc, and the "Memories invoked" block within its budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from orchestrator.plugins.memory_backend import SHORT_ID_CHARS, RetrieveResult, shortest_unique  # noqa: F401

MEMORIES_HEADER = "Memories invoked:"
RECENT_HEADER = "Recent work (newest first):"
RELATED_HEADER = "Related work from any time:"
# The window: sliding_window's idea (its window is 14 docs), one dated line a ticket, as many as
# fit recent_share of the budget (the rest are counted). It covers the same newest tickets that
# "Related work" leaves out (DEFAULT_RELATED_WINDOW), so no recent ticket falls between the two
# parts: with 10 here and 20 there, tickets 11-20 were in neither, and the block showed fewer
# related tickets than sliding_window's summary (`middle bench tickets`, "(block)" rows: 0.859
# against 0.861 on the development split, 0.875 against 0.881 held out; 20 and 20: 0.876 and 0.895).
DEFAULT_RECENT_TICKETS = 20
DEFAULT_RECENT_SHARE = 0.4  # of memories_budget_chars at most; what it leaves goes to "Related"
# "Related work from any time" leaves out the project's newest N tickets: the recent part shows
# the newest of them and a ticket's own run covers the rest, so the ranked part's places go to
# older work. Measured on the development split of the datasette replay (`middle bench tickets
# --before-last 1500`, "(related)" rows): see docs/memory-benchmarks.md.
DEFAULT_RELATED_WINDOW = 20
_MIN_RECENT_LINE = 60  # a recent ticket's line shorter than this names nothing: show fewer
DEFAULT_MAX_DOC_CHARS = 20000  # see Config.memory.max_doc_chars
DEFAULT_MEMORIES_BUDGET_CHARS = 2000  # about 500 tokens per injection
DEFAULT_MAX_QUERY_CHARS = 4000  # see Config.memory.max_query_chars
DEFAULT_MAX_REQUEST_CHARS = 100_000  # see Config.memory.max_request_chars
MIN_MAX_QUERY_CHARS = 50  # a query names a few key words at least
MIN_MAX_DOC_CHARS = 200  # room for some text plus the truncation marker
MIN_MEMORIES_BUDGET_CHARS = 100  # room for the header plus the "not shown" note
CUT_MARKER = " … [truncated]"
_MIN_CUT_CHARS = 40  # a cut doc keeping less than this says nothing; drop it instead
DOC_ID_CHARS = SHORT_ID_CHARS  # `middle memory list` shows this much of a doc's id
# The pinned docs go first in "Related work" within this share of its room; pins past it come
# after the query's related docs. A team's pins at 100,000 docs (one in 500, or ten rules of 150
# characters) otherwise took the whole room and no doc the query found reached the agent, a
# just-made supersede included.
PINNED_SHARE = 0.5


def unique_ids(idents: list[str]) -> dict[str, str]:
    """Each of `idents` (whole ids, e.g. every doc of a store) with the shortest prefix of it,
    DOC_ID_CHARS at least, that no other of them starts with: the ids sorted, each told from
    its neighbours (the one it shares most with is next to it)."""
    ordered = sorted(set(idents))
    out = {}
    for n, ident in enumerate(ordered):
        out[ident] = shortest_unique(ident, ordered[max(0, n - 1):n + 2])
    return out


def doc_id(doc: str) -> str:
    """A doc's id: the start of its text's SHA-256. It names the same doc in every backend and
    after a reindex; `middle memory delete` takes any unambiguous prefix of 4+ characters."""
    import hashlib  # here: OpenSSL loads in a tenth of `middle --help`, which needs no doc id

    return hashlib.sha256(doc.encode("utf-8", "surrogatepass")).hexdigest()


# The completion doc's lines after its summary (issue 23: decisions go in), by decision field.
DECISION_LINES = (("decisions", "Decided"), ("rejected", "Rejected"),
                  ("instructions", "The human's instructions"),
                  ("feedback", "The human's review"))  # `middle feedback`: the human's decisions


def completion_doc(title: str, description: str | None, decision: dict[str, Any]) -> str:
    """The doc a completed ticket leaves in memory: the contract's line, then one line each for the
    decisions, rejected alternatives and the human's instructions the agent listed, and the
    human's review feedback (`middle feedback`; orchestrator.graph.rounds joins the rounds)."""
    doc = f"Ticket: {title}. {description or ''}. {decision.get('summary', '')}"
    for key, label in DECISION_LINES:
        items = [" ".join(str(i).split()) for i in decision.get(key) or [] if str(i).strip()]
        if items:
            doc += f"\n{label}: " + "; ".join(i.rstrip(".;") for i in items) + "."
    return doc


def truncate_doc(doc: str, max_chars: int) -> str:
    """`doc` itself if it fits in max_chars, else its head plus a visible marker, within max_chars.

    Cutting an already cut doc returns it unchanged, so the text a caller keeps (to delete it
    later) and the text the backend stores are the same string.
    """
    if len(doc) <= max_chars:
        return doc
    widest = f"\n… [truncated: {len(doc)} chars, kept {max_chars}]"
    keep = max(0, max_chars - len(widest))
    return doc[:keep] + f"\n… [truncated: {len(doc)} chars, kept {keep}]"


def format_memories(
    results: list[RetrieveResult], budget_chars: int = DEFAULT_MEMORIES_BUDGET_CHARS
) -> str:
    """The contract's block: header + one doc per line from every result, at most budget_chars long.

    Whole docs are kept in rank order while they fit; the first that does not is cut with a
    visible marker, and a last line says how many docs were left out. No docs: ''.
    """
    docs = [doc for result in results for doc in result.get("docs", [])]
    return "".join(text for _, text in memories_layout(docs, budget_chars))


def entry(doc: str, note: str = "", ident: str | None = None) -> str:
    """A doc as the block shows it with ids: `[id] ` (what the agent names in `memories_used`
    and a person finds with `middle memory show`: `ident`, by default its first DOC_ID_CHARS),
    a note (e.g. that it was superseded), then its text, its later lines indented under it."""
    head = f"[{ident or doc_id(doc)[:DOC_ID_CHARS]}] " + (f"({note}) " if note else "")
    return head + doc.replace("\n", "\n  ")


def place_pins(pinned: list[str], related: list[str], room: int, limit: int | None,
               notes: Mapping[str, str] | None = None) -> list[str]:
    """The related part's docs in order: the pinned docs whose entries fit in PINNED_SHARE of
    `room` (the first pin always; the pins the query found first, in its order, then the others
    in theirs), then the first `limit` current docs of `related` (each with the superseded docs
    listed right below it, which are history and not counted), then the other pins, which the
    budget shows as room is left (or counts as not shown)."""
    notes = notes or {}
    pins = set(pinned)
    found = [doc for doc in related if doc in pins]  # in the query's order
    pinned = found + [doc for doc in pinned if doc not in set(found)]
    related = [doc for doc in related if doc not in pins]
    if limit is not None:
        kept: list[str] = []
        current = 0
        for doc in related:
            if doc in notes and kept:
                kept.append(doc)
            elif current < limit:
                current += 1
                kept.append(doc)
        related = kept
    first = pins_within(pinned, room, notes)
    return pinned[:first] + related + pinned[first:]


def pins_within(pinned: list[str], room: int, notes: Mapping[str, str] | None = None,
                idents: Mapping[str, str] | None = None) -> int:
    """How many of `pinned`, in order, the related part puts first: those whose entries fit in
    PINNED_SHARE of `room`, and the first one always."""
    used, first = 0, 0
    for doc in pinned:
        used += 1 + len(entry(doc, (notes or {}).get(doc, ""), (idents or {}).get(doc)))
        if first and used > room * PINNED_SHARE:
            break
        first += 1
    return first


def memories_layout(docs: list[str], budget_chars: int = DEFAULT_MEMORIES_BUDGET_CHARS,
                    header: str = MEMORIES_HEADER, named_budget: int | None = None,
                    ids: bool = False, notes: Mapping[str, str] | None = None,
                    idents: Mapping[str, str] | None = None) -> list[tuple[int | None, str]]:
    """The pieces of the "Memories invoked" block in order: (doc position, the text shown of it)
    for docs, (None, text) for the header and the "not shown" note. Joined, they are the block;
    `middle bench tickets` uses the positions to count how much of the block was relevant.
    `header` and `named_budget` (the budget the note names) serve the block's "Related" part;
    `ids`: each doc shown as `entry` (with its `notes`, and its id from `idents` when there)."""
    if not docs:
        return []
    if ids:
        docs = [entry(doc, (notes or {}).get(doc, ""), (idents or {}).get(doc)) for doc in docs]
    shown_budget = budget_chars if named_budget is None else named_budget

    def note(n: int) -> str:
        return f"\n[{n} more memories not shown: budget of {shown_budget} chars]" if n else ""

    reserve = len(note(len(docs)))  # the longest note there could be
    parts: list[tuple[int | None, str]] = [(None, header)]
    used = len(header)
    for i, doc in enumerate(docs):
        rest = len(docs) - i - 1
        if used + 1 + len(doc) + (reserve if rest else 0) <= budget_chars:
            parts.append((i, "\n" + doc))
            used += 1 + len(doc)
            continue
        room = budget_chars - used - 1 - len(CUT_MARKER) - len(note(rest))
        if room >= _MIN_CUT_CHARS:
            parts.append((i, "\n" + doc[:room].rstrip() + CUT_MARKER))
            parts.append((None, note(rest)))
        else:
            parts.append((None, note(rest + 1)))
        break
    return [(i, text) for i, text in parts if text]


@dataclass
class Block:
    """The block as the agent is shown it: its text, how many of the recent docs it shows (the
    first `recent_shown`), and the related docs it shows (whole or cut), in order."""

    text: str
    recent_shown: int
    related: list[str]
    # (doc or None for headers and notes, the text shown of it), joined they are `text`
    parts: list[tuple[str | None, str]]
    # the docs whose id the block shows longer than DOC_ID_CHARS (two docs share those), with it
    idents: dict[str, str] = field(default_factory=dict)

    def ident(self, doc: str) -> str:
        """The id the block shows `doc` by: what the agent names in memories_used, and what
        the run's recall record and `middle log` show, so each can be pasted to `show`."""
        return self.idents.get(doc) or doc_id(doc)[:DOC_ID_CHARS]

    @property
    def recent(self) -> list[str]:
        """The recent docs it shows, newest first."""
        return [doc for doc, _ in self.parts[1:1 + self.recent_shown] if doc is not None]


def format_block(recent: list[tuple[str, str]], docs: list[str],
                 budget_chars: int = DEFAULT_MEMORIES_BUDGET_CHARS,
                 recent_share: float = DEFAULT_RECENT_SHARE, limit: int | None = None,
                 ids: bool = False, notes: Mapping[str, str] | None = None) -> str:
    """The block with its two parts: "Recent work" (`recent`: (doc, date) pairs, newest first)
    within recent_share of the budget, then "Related work from any time" (the ranked `docs`,
    less those shown as recent, the first `limit` of them) in what is left. No recent work:
    the flat block under the header alone. `ids`: every memory shown with its id (see `entry`)."""
    return block_layout(recent, docs, budget_chars, recent_share, limit, ids, notes).text


def block_layout(recent: list[tuple[str, str]], docs: list[str],
                 budget_chars: int = DEFAULT_MEMORIES_BUDGET_CHARS,
                 recent_share: float = DEFAULT_RECENT_SHARE, limit: int | None = None,
                 ids: bool = False, notes: Mapping[str, str] | None = None,
                 idents: Mapping[str, str] | None = None) -> Block:
    """format_block's block with what it shows (`middle bench tickets` scores the block the
    agent sees from it). `idents`: the id each doc is shown with, where not its first
    DOC_ID_CHARS characters (see shortest_unique)."""
    lines = _recent_lines(recent, int(budget_chars * recent_share), ids, idents)
    shown = {doc for doc, _ in recent[:len(lines)]}
    related = [doc for doc in docs if doc not in shown][:limit]
    if not lines:
        flat = memories_layout(related, budget_chars, ids=ids, notes=notes, idents=idents)
        return _block([(None if i is None else related[i], text) for i, text in flat], 0, idents)
    head = "\n".join([MEMORIES_HEADER, RECENT_HEADER, *lines])
    room = budget_chars - len(head) - 1  # the rest of the budget, after the joining newline
    layout = memories_layout(related, room, header=RELATED_HEADER, named_budget=budget_chars,
                             ids=ids, notes=notes, idents=idents)
    if related and len("".join(piece for _, piece in layout)) > room:
        layout = []  # too little room for even the header and its note
    parts: list[tuple[str | None, str]] = [(None, f"{MEMORIES_HEADER}\n{RECENT_HEADER}")]
    parts += [(doc, "\n" + line) for (doc, _), line in zip(recent, lines)]
    if layout:
        parts.append((None, "\n"))
        parts += [(None if i is None else related[i], text) for i, text in layout]
    return _block(parts, len(lines), idents)


def _block(parts: list[tuple[str | None, str]], recent_shown: int,
           idents: Mapping[str, str] | None = None) -> Block:
    related = [doc for doc, _ in parts[1 + recent_shown:] if doc is not None]
    return Block("".join(text for _, text in parts), recent_shown, related, parts, dict(idents or {}))


def _recent_lines(recent: list[tuple[str, str]], budget_chars: int, ids: bool = False,
                  idents: Mapping[str, str] | None = None) -> list[str]:
    """One line per recent ticket ("- DATE text", or "- DATE [id] text" with `ids`; whitespace
    folded, cut to fit), as many as leave each line at least _MIN_RECENT_LINE characters within
    budget_chars."""
    room = budget_chars - len(MEMORIES_HEADER) - 1 - len(RECENT_HEADER)
    count = len(recent)
    while count and room // count - 1 < _MIN_RECENT_LINE:
        count -= 1
    if not count:
        return []
    width = room // count - 1  # each line after its newline
    lines = []
    for doc, date in recent[:count]:
        ident = f"[{(idents or {}).get(doc) or doc_id(doc)[:DOC_ID_CHARS]}] " if ids else ""
        line = f"- {date[:10]} {ident}{' '.join(doc.split())}".rstrip()
        lines.append(line if len(line) <= width else line[:width - 2].rstrip() + " …")
    return lines
