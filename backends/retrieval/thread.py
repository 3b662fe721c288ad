"""Work comes in threads: a doc's place in time, counted in docs, weighed with its relevance.

A feature, a bug hunt or a refactor is worked on in a burst of tickets. A new ticket's related
work is mostly the burst it belongs to, and the burst runs on past the newest tickets the
block's "Recent work" shows: on the datasette history, 120 of the 153 relatives older than
the newest 20 tickets (development split) are 21 to 60 tickets back. So when a query continues
a thread, among docs that match it about as well, the one with fewer docs newer than it is
likelier to be the thread's. Age is counted in docs, not days: a project's tempo (ten tickets
a day or one a week) does not change how many tickets back a thread reaches.

Two guards keep a strong match from any time first:
- the blend is additive with a small weight (`middle bench decisions`: every set stays at
  hit@1 1.000 with the default weight; at 0.5 the history set fell to 0.214);
- it applies only when the query continues a thread (`in_thread`): a question about any time
  (a decision, a passage of a corpus indexed in no order: MuSiQue fell from R@5 0.624 to 0.586
  without this guard, and is unchanged with it) is ranked by relevance alone.
"""

from __future__ import annotations

import math
from typing import Sequence

REACH = 10  # docs more than REACH scales back weigh e^-10 of the newest: counted as none
BEST = 5  # the query's best matches that tell whether it continues a thread (what the agent is shown)


def place_weight(place: int | None, scale: float) -> float:
    """exp(-place / scale) for a doc with `place` docs newer than it; 0 beyond the reach read."""
    return math.exp(-place / scale) if place is not None else 0.0


def in_thread(fused: Sequence[tuple[int, float]], place: dict[int, int], scale: float) -> bool:
    """Whether the query continues a thread: one of its BEST best matches is among the newest
    `scale` docs. A ticket on ongoing work matches that work's newest tickets; a question
    about any time matches docs from anywhere, and a doc's place then says nothing about it."""
    return any(place.get(doc, scale) < scale for doc, _ in fused[:BEST])


def blend(fused: Sequence[tuple[int, float]], newest: Sequence[int], pool: int, weight: float,
          scale: float) -> list[tuple[int, float]]:
    """`fused` (id, relevance in [0, 1], best first) as it is when the query continues no
    thread; else with the first `pool` of `newest` (ids, newest first) added at relevance 0
    (the thread's newest work is a candidate even when it shares no word with the query), each
    scored (1 - weight) * relevance + weight * place_weight; best first, ties by id (older
    first)."""
    place = {doc: n for n, doc in enumerate(newest)}
    if not weight or not in_thread(fused, place, scale):
        return list(fused)
    relevance = dict(fused)
    for doc in newest[:pool]:
        relevance.setdefault(doc, 0.0)
    scored = {doc: (1 - weight) * rel + weight * place_weight(place.get(doc), scale)
              for doc, rel in relevance.items()}
    return sorted(scored.items(), key=lambda item: (-item[1], item[0]))
