"""OpenIE results (entities + triples), text normalisation, and the deterministic offline extractor."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

Ranges = tuple[tuple[int, int], ...]  # character ranges [start, end) of a passage

# Caps keep a 1 MB doc from turning into a graph of its own: the first sentences carry the
# entities a memory is about, and the embedder reads only the start of a passage anyway.
MAX_SENTENCES = 400
MAX_ENTITIES_PER_SENTENCE = 12
MAX_PHRASES_PER_SENTENCE = 4
MAX_FACTS = 300
MAX_PREDICATE_WORDS = 8
MAX_ENTITY_WORDS = 8

_PUNCT = re.compile(r"[^\w\s]|_", re.UNICODE)
_SPACES = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Lower case, punctuation (and control characters) to spaces, whitespace collapsed."""
    text = text.lower()
    if not text.isprintable():  # most text is: skip the per-character pass
        text = "".join(c if c.isprintable() else " " for c in text)
    return _SPACES.sub(" ", _PUNCT.sub(" ", text)).strip()


@dataclass
class Extraction:
    """One passage's OpenIE: normalised entity phrases and (subject, predicate, object) facts."""

    entities: list[str] = field(default_factory=list)
    triples: list[tuple[str, str, str]] = field(default_factory=list)
    source: str = "offline"
    skipped_triples: int = 0  # malformed triples dropped (not 3 strings, or empty once normalised)
    # Where the passage states each fact: character ranges per triple (aligned with triples),
    # known for the offline extractor; an LLM's triples have none (its facts are embedded alone).
    evidence: list[Ranges] = field(default_factory=list)
    # Each entity's first mention in the passage (offline extractor only), by name.
    mentions: dict[str, Ranges] = field(default_factory=dict)

    @classmethod
    def build(cls, entities: list, triples: list, source: str,
              evidence: list[Ranges] | None = None,
              mentions: list[Ranges] | None = None) -> Extraction:
        """Normalise raw entities and triples; drop (and count) malformed triples. A triple
        repeated in one passage stays repeated: an edge's weight counts co-occurrences."""
        out = cls(source=source)
        seen: dict[str, None] = {}
        for n, raw in enumerate(entities):
            if isinstance(raw, str) and (name := normalise(raw)):
                seen.setdefault(name, None)
                if mentions is not None:
                    out.mentions.setdefault(name, mentions[n])
        for n, raw in enumerate(triples):
            if not (isinstance(raw, (list, tuple)) and len(raw) == 3
                    and all(isinstance(part, str) for part in raw)):
                out.skipped_triples += 1
                continue
            subject, predicate, obj = (normalise(part) for part in raw)
            if not subject or not obj:
                out.skipped_triples += 1
                continue
            out.triples.append((subject, predicate, obj))
            if evidence is not None:
                out.evidence.append(evidence[n])
            seen.setdefault(subject, None)
            seen.setdefault(obj, None)
        out.entities = list(seen)
        return out


# --- the offline extractor ------------------------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!?;。！？])\s+|\n+")
_TOKEN = re.compile(r"\w+(?:['’.\-/]\w+)*", re.UNICODE)


def _words(text: str) -> set[str]:
    return set(text.split())


# Lower-case words allowed inside a name ("University of Copenhagen", "Ludwig van Beethoven").
_CONNECTORS = {"of", "the", "de", "del", "della", "da", "di", "du", "des", "van", "von", "der",
               "den", "la", "le", "les", "y", "al", "bin", "el"}
# Capitalised words that start sentences but name nothing.
_STOP = _words("""
a an the this that these those it its he she they we i you his her their our my your him them
us me there here in on at by for from to of with as and or but if when while after before since
until during about above below over under into onto through between among is was are were be
been being has have had do does did not no yes so also then thus however although though
because what which who whom whose where why how all any both each every few many most other
some such only own same than too very can will just should now one two three mr mrs ms dr st
according following later early late many several another hey hi hello wow oh ah yes yeah yep
no nope ok okay good great nice cool awesome amazing thanks thank sure well really absolutely
totally definitely congrats congratulations anyway anything everything something nothing anyone
everyone someone maybe perhaps please sorry let lol haha omg dear today yesterday tomorrow
tonight""")
# Clock times ("1:56 pm") name no entity, and would tie every line of a chat session together.
_TIME = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s*[ap]\.?m\.?\b)?", re.IGNORECASE)


# Verbs a ticket or commit starts with, and the labels of the completion doc ("Ticket: ...
# Changed: ..."): capitalised at a sentence's start, they name no work ("Add", "Fix").
_LEADING = _words("""
add added adds adding fix fixed fixes fixing remove removed removes update updated updates
refactor refactored rename renamed move moved implement implemented support supports allow
allowed allows use uses make makes change changed changes improve improved improves test tested
tests document documented docs release released bump bumped merge merged revert reverted handle
handled handles show shows showed hide hides create created creates delete deleted deletes drop
dropped replace replaced switch switched ensure ensures avoid avoids prevent prevents enable
enabled enables disable disabled expose exposed return returns raise raises run runs ran build
built install installed upgrade upgraded simplify simplified clean cleaned tidy tweak tweaked
correct corrected rewrite rewrote restore restored introduce introduced extract extracted split
initial new ticket tickets note notes see refs closes ref""")
# Spans a developer's text names work with, whatever their case: `code spans`, --options and
# error names (paths, dotted.names and identifiers are tokens, see _is_name_token).
_CODE_SPAN = re.compile(r"`([^`\n]{2,80})`|(?<![\w-])(--[A-Za-z][\w-]+)|\b(\w+(?:Error|Exception|Warning))\b")


def _is_code_token(token: str) -> bool:
    """A path or dotted name (datasette/views/table.py, sqlite3.connect): one of its parts has
    three or more letters, so "e.g" and "U.S" are not code."""
    return ("/" in token or "." in token) and any(
        sum(c.isalpha() for c in part) >= 3 for part in re.split(r"[./]", token))


def _is_name_token(token: str) -> bool:
    first = token[0]
    # "I'm", "What's": a stopword with a contraction names nothing.
    if ("'" in token or "’" in token) and re.split("['’]", token.lower())[0] in _STOP:
        return False
    return first.isupper() or first.isdigit() or any(c.isdigit() for c in token) or "_" in token \
        or (token[1:] != token[1:].lower() and token.isalnum()) \
        or _is_code_token(token)  # camelCase identifiers, paths


def _spans(sentence: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of name-like spans: capitalised runs, numbers, dates, identifiers,
    paths, code spans, options and error names."""
    spans: list[tuple[int, int, str]] = []
    for m in _CODE_SPAN.finditer(sentence):
        group = next(g for g in (1, 2, 3) if m.group(g))
        if len(m.group(group).split()) <= MAX_ENTITY_WORDS:
            spans.append((m.start(group), m.end(group), m.group(group)))
    taken = [(a, b) for a, b, _ in spans]
    tokens = [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(sentence)
              if not any(a <= m.start() < b for a, b in taken)]
    i = 0
    while i < len(tokens):
        if not _is_name_token(tokens[i][2]):
            i += 1
            continue
        j = i + 1
        while j < len(tokens) and j - i < MAX_ENTITY_WORDS:
            word = tokens[j][2]
            gap = sentence[tokens[j - 1][1]:tokens[j][0]]
            if any(c in gap for c in ",;:()[]\"“”!?") or ". " in gap:
                break
            if _is_name_token(word):
                j += 1
            elif word.lower() in _CONNECTORS and j + 1 < len(tokens) \
                    and _is_name_token(tokens[j + 1][2]) and tokens[j + 1][2][0].isupper():
                j += 2
            else:
                break
        words = tokens[i:j]
        # "The Journal ..." -> "Journal ...", "Fix CSV export" -> "CSV"
        while words and words[0][2].lower() in _STOP | _LEADING:
            words = words[1:]
        while words and words[-1][2].lower() in _CONNECTORS | _STOP:
            words = words[:-1]
        if words and not (len(words) == 1 and len(words[0][2]) < 2):
            spans.append((words[0][0], words[-1][1], sentence[words[0][0]:words[-1][1]]))
        i = j
    return sorted(spans)


# Common words that are not topics (verbs, adverbs, chat filler): a phrase is a run of other
# lower-case words, e.g. "support group", "csv export".
_COMMON = _words("""
get got getting go went going gone goes make made making take took taking come came coming
see saw seen seeing say said saying tell told know knew known think thought feel felt want
wanted need needed like liked love loved look looked seem seemed try tried trying use used
using find found give gave keep kept let put start started help helped work worked worked
really just also still even much more most very quite pretty lot lots bit kind sort thing
things stuff way ways time times day days week weeks year years something anything everything
new old big small little great good best better bad nice happy glad sad fun hard easy sure
able last first next same different own whole lately recently always never often sometimes
again ever already soon yet back away around together though about would could might must
shall should will can may been being were have has had does did done doing into onto upon
your yours mine ours theirs hers myself yourself itself them they their there these those
""") | _STOP


def _phrases(sentence: str, taken: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Noun-phrase-like runs of lower-case content words outside the name spans."""
    out: list[tuple[int, int, str]] = []
    run: list[tuple[int, int, str]] = []

    def flush() -> None:
        if run and any(len(w[2]) >= 4 for w in run):
            out.append((run[0][0], run[-1][1], sentence[run[0][0]:run[-1][1]]))
        run.clear()

    for m in _TOKEN.finditer(sentence):
        word = m.group()
        inside = any(a <= m.start() < b for a, b, _ in taken)
        gap = sentence[run[-1][1]:m.start()] if run else ""
        if inside or not word.isalpha() or not word.islower() or word in _COMMON \
                or len(word) < 3 or any(c in gap for c in ",;:()[]\"!?") or len(run) >= 3:
            flush()
            if inside or not word.isalpha() or not word.islower() or word in _COMMON or len(word) < 3:
                continue
        run.append((m.start(), m.end(), word))
    flush()
    return out


def _predicate(text: str) -> str:
    words = normalise(text).split()
    return " ".join(words[:MAX_PREDICATE_WORDS])


def _sentences(text: str):
    """(offset, sentence) of each piece between sentence breaks."""
    start = 0
    for m in _SENTENCE.finditer(text):
        yield start, text[start:m.start()]
        start = m.end()
    yield start, text[start:]


def extract_offline(passage: str) -> Extraction:
    """Entities from name-like spans; facts from entity pairs inside a sentence, the words
    between them as predicate, and the passage's first entity (its topic) linked to the first
    entity of each later sentence. Each fact keeps the passage ranges it was read from: the
    words from its subject to its object, and for a topic link the topic's first mention too."""
    raw_entities: list[str] = []
    mentions: list[Ranges] = []
    triples: list[tuple[str, str, str]] = []
    evidence: list[Ranges] = []
    topic: str | None = None
    topic_at: tuple[int, int] = (0, 0)
    text = _TIME.sub(lambda m: " " * len(m.group()), passage[:200_000])

    def mention(span: tuple[int, int, str], at: int) -> None:
        raw_entities.append(span[2])
        mentions.append(((at + span[0], at + span[1]),))

    def fact(subject: str, predicate: str, obj: str, *ranges: tuple[int, int]) -> None:
        triples.append((subject, predicate, obj))
        evidence.append(tuple(ranges))

    for n, (at, sentence) in enumerate(_sentences(text)):
        if n >= MAX_SENTENCES or len(triples) >= MAX_FACTS:
            break
        spans = [s for s in _spans(sentence) if normalise(s[2])][:MAX_ENTITIES_PER_SENTENCE]
        title_phrases: list[tuple[int, int, str]] = []
        if n == 0:
            # The first sentence is a doc's title: its plain-word phrases name the work ("Make
            # custom type and foreign key mutually exclusive"). Without names they are its
            # entities; beside names they hang off the topic, leaving the names' facts whole.
            # A one-word phrase ("song", "export") is a hub, not a topic: only multi-word ones.
            title_phrases = [p for p in _phrases(sentence, spans)
                             if normalise(p[2]) and len(p[2].split()) > 1]
            title_phrases = title_phrases[:MAX_PHRASES_PER_SENTENCE]
            if not spans:
                spans, title_phrases = title_phrases, []
        if not spans:
            # A sentence naming nothing (chat, notes) is about its phrases: hang them off the
            # passage's topic. Where names exist, phrases only added hubs (measured on MuSiQue).
            if topic is not None:
                for phrase in _phrases(sentence, [])[:MAX_PHRASES_PER_SENTENCE]:
                    mention(phrase, at)
                    fact(topic, _predicate(sentence[:phrase[0]]) or "mentions", phrase[2],
                         topic_at, (at, at + phrase[1]))
            continue
        for span in spans:
            mention(span, at)
        if topic is None:  # a bare number is a poor topic: prefer the first named thing
            named = [sp for sp in spans if not normalise(sp[2]).replace(" ", "").isdigit()]
            topic_span = (named or spans)[0]
            topic, topic_at = topic_span[2], (at + topic_span[0], at + topic_span[1])
        first = spans[0]
        if normalise(first[2]) != normalise(topic):
            fact(topic, _predicate(sentence[:first[0]]) or "mentions", first[2],
                 topic_at, (at, at + first[1]))
        for a, b in itertools.pairwise(spans):
            fact(a[2], _predicate(sentence[a[1]:b[0]]) or "and", b[2], (at + a[0], at + b[1]))
        for b in spans[2:]:
            fact(first[2], _predicate(sentence[first[1]:b[0]]), b[2], (at + first[0], at + b[1]))
        for phrase in title_phrases:
            mention(phrase, at)
            fact(topic, _predicate(sentence[:phrase[0]]) or "mentions", phrase[2],
                 topic_at, (at, at + phrase[1]))
    return Extraction.build(raw_entities, triples[:MAX_FACTS], "offline", evidence[:MAX_FACTS],
                            mentions)
