"""The text side of memory: doc ids, the cap on a stored doc, and seed 000's "Memories invoked" block within its budget."""

from __future__ import annotations

from orchestrator.memory.backend import RetrieveResult

MEMORIES_HEADER = "Memories invoked:"
DEFAULT_MAX_DOC_CHARS = 8000
DEFAULT_MEMORIES_BUDGET_CHARS = 2000  # about 500 tokens, what seed 002 aims at per injection
MIN_MAX_DOC_CHARS = 200  # room for some text plus the truncation marker
MIN_MEMORIES_BUDGET_CHARS = 100  # room for the header plus the "not shown" note
CUT_MARKER = " … [truncated]"
_MIN_CUT_CHARS = 40  # a cut doc keeping less than this says nothing; drop it instead
DOC_ID_CHARS = 8  # `middle memory list` shows this much of a doc's id


def doc_id(doc: str) -> str:
    """A doc's id: the start of its text's SHA-256. It names the same doc in every backend and
    after a reindex; `middle memory delete` takes any unambiguous prefix of 4+ characters."""
    import hashlib  # here: OpenSSL loads in a tenth of `middle --help`, which needs no doc id

    return hashlib.sha256(doc.encode("utf-8", "surrogatepass")).hexdigest()


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
    """Seed 000's block: header + one doc per line from every result, at most budget_chars long.

    Whole docs are kept in rank order while they fit; the first that does not is cut with a
    visible marker, and a last line says how many docs were left out. No docs: ''.
    """
    docs = [doc for result in results for doc in result.get("docs", [])]
    return "".join(text for _, text in memories_layout(docs, budget_chars))


def memories_layout(docs: list[str], budget_chars: int = DEFAULT_MEMORIES_BUDGET_CHARS
                    ) -> list[tuple[int | None, str]]:
    """The pieces of the "Memories invoked" block in order: (doc position, the text shown of it)
    for docs, (None, text) for the header and the "not shown" note. Joined, they are the block;
    `middle bench tickets` uses the positions to count how much of the block was relevant."""
    if not docs:
        return []

    def note(n: int) -> str:
        return f"\n[{n} more memories not shown: budget of {budget_chars} chars]" if n else ""

    reserve = len(note(len(docs)))  # the longest note there could be
    parts: list[tuple[int | None, str]] = [(None, MEMORIES_HEADER)]
    used = len(MEMORIES_HEADER)
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
