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


BOOTSTRAP_RESAMPLES = 2000


def interval95(values: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """A 95% interval of the mean of `values`: the 2.5th and 97.5th percentiles of the means of
    BOOTSTRAP_RESAMPLES resamples with replacement (seeded: the same values give the same
    interval). With a few dozen long-range tickets it is wide: read a difference against it."""
    import random

    if not values:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choice(values) for _ in range(n)) / n for _ in range(BOOTSTRAP_RESAMPLES))
    return percentile(means, 2.5), percentile(means, 97.5)
