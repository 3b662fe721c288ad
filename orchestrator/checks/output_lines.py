"""A failing run's output as lines that can be compared with the base's, for a command read by its
exit code (`baseline = "exit-code"`, docs/checks.md): the same failure prints the same lines on the
base and on the ticket once what changes on every run is left out.

`normalise` leaves out, line by line: terminal colours; durations and timings (`0.12s`, `in 35 ms`,
`(0.00s)`, `finished in 0.00s`) and pytest's `--durations` rows; dates and clock times; memory
addresses (`0x7f3a...`) and build hashes (`calc-c6626fb655a8d231`); process and thread ids (`pid
4242`, Rust's `thread 'x' (19329) panicked`); temporary paths (`/tmp/...`) and the folder the check
ran in (the base runs in another worktree); blank lines and surrounding spaces. Ordering is noise
too (parallel runners print as tests finish): the lines are compared as a multiset, so `new_lines`
is what the ticket's run printed more often than the base's did. Counts (`Ran 3 tests`, `2 failed`)
are kept: a changed count is a changed outcome.
"""

from __future__ import annotations

import re
from collections import Counter

# A longer output is not kept (it is stored with the base's result and carried in the graph's
# state): it is not compared (None), and such a check is never "no worse" by its output
MAX_LINES = 2000
MAX_TOTAL = 100_000  # characters, once normalised
MAX_CHARS = 500  # a line's first characters

_COLOURS = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?"), "<date>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d\b"), "<date>"),
    (re.compile(r"\b\d\d?:\d\d:\d\d(?:[.,]\d+)?\b"), "<clock>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<addr>"),
    (re.compile(r"(?:/private)?/(?:tmp|var/folders|var/tmp)/\S+"), "<tmp>"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "<hash>"),
    (re.compile(r"\b(?:pid|PID|process)[ =:#]*\d+"), "<pid>"),
    (re.compile(r"(thread '[^']*') \(\d+\)"), r"\1"),
    (re.compile(r"\b\d+(?:[.,]\d+)?\s*(?:ns|µs|us|ms|s|sec|secs|seconds?|m|min|minutes?)\b"), "<time>"),
]
# pytest's `--durations=N` report: which tests it lists, and how many it hides as too fast, depend on
# how fast each ran (a loaded machine lists one more), so its rows are timing, not outcome
_TIMING_ROWS = re.compile(r"^(?:<time> (?:setup|call|teardown) |\(\d+ durations? < <time> hidden)")


def normalise(text: str, cwd: str = "") -> list[str] | None:
    """The output's lines with each run's own noise left out (None: longer than MAX_LINES)."""
    plain = _COLOURS.sub("", text)
    if cwd:
        plain = plain.replace(cwd.rstrip("/"), "<cwd>")
    lines = []
    for line in plain.splitlines():
        line = line.strip()
        if not line:
            continue
        for pattern, repl in _RULES:
            line = pattern.sub(repl, line)
        if _TIMING_ROWS.match(line):
            continue
        lines.append(" ".join(line.split())[:MAX_CHARS])
    return lines if len(lines) <= MAX_LINES and sum(map(len, lines)) <= MAX_TOTAL else None


def new_lines(ticket: list[str] | None, base: list[str] | None) -> list[str] | None:
    """The lines the ticket's run printed more often than the base's did, in the ticket's order
    (None: either output was not kept, so they cannot be compared)."""
    if ticket is None or base is None:
        return None
    extra = Counter(ticket) - Counter(base)
    out = []
    for line in ticket:
        if extra[line] > 0:
            extra[line] -= 1
            out.append(line)
    return out


__all__ = ["MAX_LINES", "new_lines", "normalise"]
