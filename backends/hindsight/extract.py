"""The offline fact extractor: sentence facts, their kind, entity spans, dates and causal cues."""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass, field

import numpy as np

from backends import retrieval
from backends.retrieval.embedders.states import clip_map

from . import dates

MEMORY_HEADER = "Memories invoked:"
CONTEXT_HEADER = "Project knowledge (Hindsight mental models"
_MIN_WORDS = 4  # a shorter sentence ("Hey Mel!") is merged into its neighbour

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n|\n\s*(?=[-*•]\s|\d+[.)]\s)")
_ABBREV = re.compile(r"\b(?:e\.g|i\.e|etc|vs|Mr|Mrs|Ms|Dr|Prof|St|Inc|Ltd|No|approx|cf)\.$", re.I)
_HEADER = re.compile(r"^\s*([A-Z][\w'.\- ]{0,39}?):\s+(?=\S)")
_CAPS = re.compile(r"\b[A-Z][\w'’&\-]*(?:\s+(?:of|the|de|da|van|von)?\s*[A-Z][\w'’&\-]*)*")
_CODE = re.compile(r"`([^`\n]{2,60})`|\b([\w\-]+(?:/[\w.\-]+)+|[A-Za-z_]\w*\.(?:py|js|ts|md|toml|json|"
                   r"yaml|yml|txt|sql|sh|go|rs|java|c|h|cpp|rb)\b|[a-z]+(?:_[a-z0-9]+)+|"
                   r"[a-z]+[A-Z]\w+|[A-Z][a-z]+[A-Z]\w+)")
_FIRST_PERSON = re.compile(r"\b(I|I'm|I've|I'd|I'll|me|my|mine|we|we're|we've|we'd|us|our|ours)\b", re.I)
_ACTION = re.compile(r"^\s*(fixed|added|removed|tried|ran|learned|changed|updated|wrote|built|"
                     r"deployed|found|switched|refactored|implemented|reverted|debugged|tested)\b", re.I)
_CAUSE_START = re.compile(r"^\s*(so|therefore|thus|hence|as a result|that's why|that is why|"
                          r"this (?:caused|meant|led)|which (?:caused|meant|led)|consequently)\b", re.I)
_CAUSE_INSIDE = re.compile(r"\b(because|due to|caused by|led to|so that|thanks to|as a result)\b", re.I)
_STARTERS = frozenset("""hey hi hello wow yes yeah no oh ok okay well so also just really good great
thanks thank sure awesome cool nice amazing congrats congratulations sorry please absolutely totally
definitely anyway btw lol haha hmm ah aw aww yay ugh what when where why how who which that this
these those there here it its i i'm i've i'd i'll we you he she they my our your his her their
today yesterday tomorrow last next ticket note fixed added""".split()) | retrieval.bm25.STOP_WORDS
_MONTH_OR_DAY = frozenset(list(dates.MONTHS) + list(dates.WEEKDAYS))


@dataclass
class DraftFact:
    """One fact before it is stored: text, kind, entity names, time, causes (earlier indexes)."""

    text: str
    kind: str = "world"
    entities: list[str] = field(default_factory=list)
    start: float | None = None  # occurred range, unix seconds; None = undated
    end: float | None = None
    caused_by: list[int] = field(default_factory=list)  # indexes of earlier facts of the doc
    cause_ids: list[int] = field(default_factory=list)  # ids of facts already in the bank
    # Where the doc says it: its header's and its sentences' character ranges (empty when not
    # found, e.g. an LLM's fact): the fact's vector pools the doc's token states there.
    ranges: tuple[tuple[int, int], ...] = ()


def strip_memory_text(text: str) -> str:
    """Drop injected memory ("Memories invoked:" blocks, the mental-model header block) so a
    retain never feeds recall back into the bank."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(MEMORY_HEADER) or stripped.startswith(CONTEXT_HEADER):
            skipping = True
            continue
        if skipping:
            if not stripped:
                skipping = False
            continue
        out.append(line)
    return "\n".join(out).strip()


def split_sentences(text: str) -> list[str]:
    """Sentences (and list items) of text, short fragments merged into a neighbour."""
    parts: list[str] = []
    pending = ""
    for piece in _SENTENCE_END.split(text):
        piece = (piece or "").strip()
        if not piece:
            continue
        if pending and _ABBREV.search(pending):  # "e.g. Foo" is not a sentence break
            pending = f"{pending} {piece}"
            continue
        if pending:
            parts.append(pending)
        pending = piece
    if pending:
        parts.append(pending)
    merged: list[str] = []
    carry = ""
    for sentence in parts:
        sentence = f"{carry} {sentence}".strip() if carry else sentence
        carry = ""
        if len(sentence.split()) < _MIN_WORDS:
            carry = sentence
            continue
        merged.append(sentence)
    if carry:
        if merged:
            merged[-1] = f"{merged[-1]} {carry}"
        else:
            merged.append(carry)
    return merged


def group(sentences: list[str], most: int) -> list[str]:
    """At most `most` chunks of adjacent sentences, as even as possible."""
    if len(sentences) <= most:
        return sentences
    size = -(-len(sentences) // most)
    return [" ".join(sentences[i:i + size]) for i in range(0, len(sentences), size)]


def header_of(text: str) -> tuple[str, str]:
    """(label, body): a leading "Speaker:" label, or a ticket's title for "Ticket: Title. ..."."""
    m = _HEADER.match(text)
    if not m:
        return "", text.strip()
    label, body = m.group(1).strip(), text[m.end():].strip()
    if label.lower() == "ticket":
        title, _, rest = body.partition(". ")
        if rest and len(title) <= 120:
            return f"Ticket {title.strip()}", rest.strip()
    return label, body


def entity_spans(sentence: str, known: Container[str] | None = None) -> list[str]:
    """Names in a sentence: capitalised runs (a sentence-initial common word is not one unless
    it is a known entity) and code-like identifiers (paths, files, snake_case, CamelCase)."""
    known = known or set()
    names: list[str] = []
    for m in _CAPS.finditer(sentence):
        span = re.sub(r"['’]s$", "", m.group(0)).strip(" -&")
        words = span.split()
        while words and words[0].lower() in _STARTERS | _MONTH_OR_DAY:
            words = words[1:]
        while words and words[-1].lower() in _MONTH_OR_DAY | {"of", "the", "and", "&"}:
            words = words[:-1]
        if not words:
            continue
        span = " ".join(words)
        at_start = (
            m.start() == len(sentence) - len(sentence.lstrip()) or sentence[: m.start()].rstrip()[-1:] in ".!?:\"'"
        )
        if (
            at_start
            and words[0] == m.group(0).split()[0]
            and span.lower() not in known
            and words[0].lower() not in known
        ):
            words = words[1:]  # a capital at a sentence's start says nothing; a known name does
            span = " ".join(words)
        if len(span) < 2:
            continue
        names.append(span)
    for m in _CODE.finditer(sentence):
        names.append((m.group(1) or m.group(2)).strip())
    return list(dict.fromkeys(n for n in names if n.lower() not in _STARTERS))


def extract(text: str, reference: float, max_facts: int, known: Container[str] | None = None) -> list[DraftFact]:
    """Deterministic facts of one doc; dates resolved against `reference` (unix seconds)."""
    stripped = strip_memory_text(text)
    label, body = header_of(stripped)
    sentences = group(split_sentences(body), max_facts) or ([body] if body else [])
    facts: list[DraftFact] = []
    # A speaker is the subject of every sentence of the turn; a ticket's title names its topics.
    if label.startswith("Ticket "):
        speaker = entity_spans(label[len("Ticket ") :], known)
    else:
        speaker = [label] if label else []
    for i, sentence in enumerate(sentences):
        fact = DraftFact(f"{label}: {sentence}" if label else sentence)
        fact.kind = "experience" if (_FIRST_PERSON.search(sentence) or _ACTION.search(sentence)) else "world"
        fact.entities = list(dict.fromkeys(speaker + entity_spans(sentence, known)))
        spans = dates.find_spans(sentence, reference)
        if spans:
            fact.start, fact.end = min(s.start for s in spans), max(s.end for s in spans)
        if i and (_CAUSE_START.search(sentence) or (_CAUSE_INSIDE.search(sentence) and i)):
            fact.caused_by = [i - 1]
        facts.append(fact)
    header = stripped[: len(stripped) - len(body)].strip() if label else ""
    for fact, ranges in zip(facts, _places(text, header, sentences)):
        fact.ranges = ranges
    return facts


def _places(text: str, header: str, sentences: list[str]) -> list[tuple[tuple[int, int], ...]]:
    """The ranges of text each sentence fact is read from: its header (label or ticket title)
    and the sentence, found in order in the whitespace-collapsed text (sentences are joined
    pieces of it). A sentence not found (quotes the splitter dropped, text past what the
    model reads) gets no ranges, and its fact is embedded alone."""
    clip = clip_map(text)
    cursor = 0

    def find(part: str) -> tuple[int, int] | None:
        nonlocal cursor
        wanted = " ".join(part.split())
        at = clip.clipped.find(wanted, cursor) if wanted else -1
        if at < 0:
            return None
        cursor = at + len(wanted)
        start, last = clip.to_text(np.asarray([at, cursor - 1]))
        return int(start), int(last) + 1

    head = find(header) if header else None
    if header and head is None:  # the header is part of every fact: no fact without it
        return [()] * len(sentences)
    out: list[tuple[tuple[int, int], ...]] = []
    for sentence in sentences:
        place = find(sentence)
        out.append(() if place is None else ((head, place) if head else (place,)))
    return out
