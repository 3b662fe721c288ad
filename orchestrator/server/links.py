"""Links in stored text the dashboard shows: which URLs become links, and how a link opens.

One place for both renderers: `render.linkify` (plain text: run output, memories) and
`markdown` (ticket descriptions).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# A bare http(s) URL in running text; trailing punctuation is the sentence's, not the link's.
_URL = re.compile(r"https?://[^\s<>\"'`]+", re.I)
_TRAILING = ".,;:!?)]}'\""
# Every link opens in a new tab, gives the target no handle on the dashboard's window, no
# referrer, and no ranking credit (the text is anyone's with write access to the tickets).
LINK_ATTRS = {"rel": "noopener noreferrer nofollow", "target": "_blank"}


def http_only(url: str) -> bool:
    """Whether a URL may be a link: http(s) only (javascript:, data:, file: stay text)."""
    return url.strip().lower().startswith(("http://", "https://"))


def bare_urls(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each bare http(s) URL in text, without its trailing punctuation."""
    for match in _URL.finditer(text):
        yield match.start(), match.start() + len(match.group(0).rstrip(_TRAILING))
