"""Dates in text: absolute dates, relative ones resolved against a reference time, query ranges."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

DAY = 86400.0
MONTHS = {m: i + 1 for i, m in enumerate(
    "january february march april may june july august september october november december".split())}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})
MONTHS["sept"] = 9
WEEKDAYS = {d: i for i, d in enumerate("monday tuesday wednesday thursday friday saturday sunday".split())}
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
           "a couple of": 2, "a couple": 2, "couple of": 2, "a few": 3, "few": 3, "several": 3}

_M = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
     r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_D = r"(\d{1,2})(?:st|nd|rd|th)?"
_Y = r"((?:19|20)\d{2})"
_N = r"(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|" \
     r"a couple(?: of)?|couple of|a few|few|several)"
_UNIT = r"(day|week|month|year)s?"
_WD = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"

_PATTERNS = [  # (kind, regex); earlier patterns win where spans overlap
    ("iso", rf"\b{_Y}-(\d{{2}})-(\d{{2}})\b"),
    ("dmy", rf"\b{_D}(?:\s+of)?\s+{_M}\.?,?\s+{_Y}\b"),
    ("mdy", rf"\b{_M}\.?\s+{_D},?\s+{_Y}\b"),
    ("my", rf"\b{_M}\.?,?\s+(?:of\s+)?{_Y}\b"),
    ("dm", rf"\b{_D}(?:\s+of)?\s+{_M}\b"),
    ("md", rf"\b{_M}\.?\s+{_D}\b(?!\s*(?::|am|pm|%|\d))"),
    ("ago", rf"\b{_N}\s+{_UNIT}\s+ago\b"),
    ("in_n", rf"\bin\s+{_N}\s+{_UNIT}\b"),
    ("rel_unit", r"\b(last|this|next|past|previous|coming)\s+(week|weekend|month|year)\b"),
    ("rel_wd", rf"\b(last|this|next|on)\s+{_WD}\b"),
    ("word", r"\b(today|tonight|yesterday|tomorrow|this morning|this afternoon|this evening|"
             r"last night|the other day|the day before yesterday|the day after tomorrow)\b"),
    ("month", rf"\b(?:in|during|since|until|by|last|this|next|early|late|mid)[- ]{_M}\b"),
    ("year", rf"\b(?:in|during|since|until|by|of|from)\s+{_Y}\b"),
]
_COMPILED = [(kind, re.compile(rx, re.IGNORECASE)) for kind, rx in _PATTERNS]


@dataclass(frozen=True)
class TimeSpan:
    """A half-open range of unix seconds [start, end), with the words it came from."""

    start: float
    end: float
    text: str = ""


def _ts(d: date) -> float:
    return datetime(d.year, d.month, d.day, tzinfo=timezone.utc).timestamp()


def _day(d: date, days: int = 1, text: str = "") -> TimeSpan:
    return TimeSpan(_ts(d), _ts(d) + days * DAY, text)


def _month(year: int, month: int, text: str = "") -> TimeSpan:
    nxt = date(year + (month == 12), month % 12 + 1, 1)
    return TimeSpan(_ts(date(year, month, 1)), _ts(nxt), text)


def _add_months(d: date, months: int) -> tuple[int, int]:
    index = d.year * 12 + d.month - 1 + months
    return index // 12, index % 12 + 1


def _number(word: str) -> int:
    word = word.lower()
    return int(word) if word.isdigit() else NUMBERS.get(word, 1)


def _span(kind: str, m: re.Match, ref: date) -> TimeSpan | None:
    """The span one match stands for, or None when it names no real date (31 February)."""
    g = [x.lower() if isinstance(x, str) else x for x in m.groups()]
    text = m.group(0)
    try:
        if kind == "iso":
            return _day(date(int(g[0]), int(g[1]), int(g[2])), text=text)
        if kind == "dmy":
            return _day(date(int(g[2]), MONTHS[g[1].rstrip(".")], int(g[0])), text=text)
        if kind == "mdy":
            return _day(date(int(g[2]), MONTHS[g[0].rstrip(".")], int(g[1])), text=text)
        if kind == "my":
            return _month(int(g[1]), MONTHS[g[0].rstrip(".")], text)
        if kind in ("dm", "md"):
            day, month = (g[0], g[1]) if kind == "dm" else (g[1], g[0])
            return _day(date(ref.year, MONTHS[month.rstrip(".")], int(day)), text=text)
        if kind in ("ago", "in_n"):
            n, unit = _number(g[0]), g[1]
            sign = -1 if kind == "ago" else 1
            if unit == "day":
                return _day(ref + timedelta(days=sign * n), text=text)
            if unit == "week":
                start = ref + timedelta(weeks=sign * n)
                return _day(start - timedelta(days=start.weekday()), 7, text)
            if unit == "month":
                return _month(*_add_months(ref, sign * n), text)
            return TimeSpan(_ts(date(ref.year + sign * n, 1, 1)), _ts(date(ref.year + sign * n + 1, 1, 1)), text)
        if kind == "rel_unit":
            which, unit = g
            shift = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[which]
            if unit in ("week", "weekend"):
                monday = ref - timedelta(days=ref.weekday()) + timedelta(weeks=shift)
                if unit == "weekend":
                    return _day(monday + timedelta(days=5), 2, text)
                return _day(monday, 7, text)
            if unit == "month":
                return _month(*_add_months(ref, shift), text)
            return TimeSpan(_ts(date(ref.year + shift, 1, 1)), _ts(date(ref.year + shift + 1, 1, 1)), text)
        if kind == "rel_wd":
            which, target = g[0], WEEKDAYS[g[1]]
            delta = (ref.weekday() - target) % 7
            if which == "next":
                return _day(ref + timedelta(days=(target - ref.weekday()) % 7 or 7), text=text)
            if which == "last":
                delta = delta or 7
            return _day(ref - timedelta(days=delta), text=text)
        if kind == "word":
            word = g[0]
            offsets = {"yesterday": -1, "last night": -1, "tomorrow": 1, "the day before yesterday": -2,
                       "the day after tomorrow": 2}
            if word == "the other day":
                return _day(ref - timedelta(days=7), 6, text)
            return _day(ref + timedelta(days=offsets.get(word, 0)), text=text)
        if kind == "month":
            month = MONTHS[g[0].rstrip(".")]
            year = ref.year
            lead = text.lower().split()[0].split("-")[0]
            if lead == "last" or (lead in ("in", "during", "early", "late", "mid") and month > ref.month):
                year -= 1  # "in May" said in March means last May: memories are of the past
            elif lead == "next":
                year += 1
            return _month(year, month, text)
        if kind == "year":
            return TimeSpan(_ts(date(int(g[0]), 1, 1)), _ts(date(int(g[0]) + 1, 1, 1)), text)
    except (ValueError, KeyError, OverflowError):
        return None
    return None


def find_spans(text: str, reference: float) -> list[TimeSpan]:
    """Every date expression in text as a span; relative ones resolved against `reference`
    (unix seconds). Expressions that name no real date are skipped, never an error."""
    ref = datetime.fromtimestamp(reference, tz=timezone.utc).date()
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, TimeSpan]] = []
    for kind, rx in _COMPILED:
        for m in rx.finditer(text):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            span = _span(kind, m, ref)
            if span is not None:
                taken.append((m.start(), m.end()))
                found.append((m.start(), span))
    return [span for _, span in sorted(found, key=lambda item: item[0])]


_BEFORE_AFTER = re.compile(r"\b(before|after|since|until|prior to)\s+(.{3,60}?)(?=[?.!,;]|$)",
                           re.IGNORECASE)
_WHEN = re.compile(r"^\s*(when\b|what (?:date|day|time|year|month)|how long (?:ago|since|before|"
                   r"after)|since when|which (?:year|month|day|date))|\bhow long ago\b", re.IGNORECASE)


@dataclass
class QueryTime:
    """What a query says about time: a range to match fact times against, an event anchor
    ("after the trip") to resolve through recall, and whether it asks *when* something was."""

    span: TimeSpan | None = None
    anchor: str | None = None
    anchor_side: str | None = None  # "before" or "after"
    asks_when: bool = False


def parse_query(query: str, reference: float) -> QueryTime:
    """Dates and ranges of a query: "last week", "in May 2023", "before 3 June 2023",
    "after the trip" (an anchor for recall to place in time), "when did ..."."""
    out = QueryTime(asks_when=bool(_WHEN.search(query)))
    spans = find_spans(query, reference)
    for m in _BEFORE_AFTER.finditer(query):
        side = "before" if m.group(1).lower() in ("before", "until", "prior to") else "after"
        inner = find_spans(m.group(2), reference)
        if inner:
            bound = inner[0]
            out.span = (TimeSpan(float("-inf"), bound.start, m.group(0)) if side == "before"
                        else TimeSpan(bound.end if m.group(1).lower() != "since" else bound.start,
                                      float("inf"), m.group(0)))
            return out
        if out.anchor is None:
            out.anchor, out.anchor_side = m.group(2).strip(), side
    if spans:
        out.span = TimeSpan(min(s.start for s in spans), max(s.end for s in spans),
                            " / ".join(s.text for s in spans))
    return out


def iso_day(ts: float | None) -> str:
    """A unix time as 'D Month YYYY' (UTC), '' for None."""
    if ts is None or ts != ts or abs(ts) == float("inf"):
        return ""
    d = datetime.fromtimestamp(ts, tz=timezone.utc)
    return f"{d.day} {d.strftime('%B %Y')}"


def parse_iso(value: str | None) -> float | None:
    """'YYYY-MM-DD' (or a full ISO time) as unix seconds UTC; None when it does not parse."""
    if not value or not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()
