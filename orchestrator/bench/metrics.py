"""Recall@k and latency percentiles, as the benchmark tables report them."""

from __future__ import annotations

import math
from typing import Iterable, Sequence


def recall_at_k(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """|top-k ∩ gold| / |gold| (duplicates in ranked count once)."""
    if not gold:
        raise ValueError("recall needs at least one gold item")
    return len(set(ranked[:k]) & gold) / len(gold)


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between closest ranks."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
