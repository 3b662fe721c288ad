"""`<private>...</private>`: text a person marks as never to be kept in memory.

The one owner of the rule: `cut_private` is applied where text enters memory, the facade's
`prepare_doc` (every doc a ticket, `middle memory add`, an import or the HTTP API indexes, and
every edit or supersede) and `observe_round` (the ticket conversation a backend may keep), so no
capture path can store a marked span. The tag is matched case-insensitively; a `<private>` never
closed hides everything after it (a forgotten closing tag must not leak the secret), and a stray
`</private>` is dropped. What is left is the doc as stored: its id is that text's.
"""

from __future__ import annotations

import re

_OPEN = re.compile(r"<private\s*>", re.IGNORECASE)
_CLOSE = re.compile(r"</private\s*>", re.IGNORECASE)
_SPACES = re.compile(r"[ \t]{2,}")


def has_private(text: str) -> bool:
    """Whether text marks anything private (or holds a stray closing tag)."""
    return bool(_OPEN.search(text) or _CLOSE.search(text))


def cut_private(text: str) -> str:
    """Text without its `<private>` spans (tags included); unchanged when it has none.

    Spans nest: `<private>a <private>b</private> c</private>` is cut whole. Where a span was
    cut between words, the two spaces around it become one.
    """
    if not has_private(text):
        return text
    kept: list[str] = []
    depth = 0
    pos = 0
    tags = sorted([(m.start(), m.end(), 1) for m in _OPEN.finditer(text)]
                  + [(m.start(), m.end(), -1) for m in _CLOSE.finditer(text)])
    for start, end, step in tags:
        if depth == 0 and step == 1:
            kept.append(text[pos:start])
        if step == 1:
            depth += 1
        elif depth:  # a closing tag with nothing open is dropped, as text
            depth -= 1
        elif start >= pos:
            kept.append(text[pos:start])
        if depth == 0:
            pos = end
    if depth == 0:
        kept.append(text[pos:])
    joined = "".join(kept)
    return "\n".join(_SPACES.sub(" ", line).rstrip() for line in joined.split("\n")).strip()
