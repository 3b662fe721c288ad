"""Fusion of ranked lists: a weighted sum of min-max-normalised scores, or reciprocal-rank fusion."""

from __future__ import annotations

from typing import Sequence

Ranked = Sequence[tuple[int, float]]  # (id, score), best first


def min_max(ranked: Ranked) -> dict[int, float]:
    """Scores scaled to [0, 1] within the list; a list of equal scores maps to 1.0."""
    if not ranked:
        return {}
    scores = [s for _, s in ranked]
    low, high = min(scores), max(scores)
    span = high - low
    return {i: (s - low) / span if span > 0 else 1.0 for i, s in ranked}


def weighted_sum(dense: Ranked, sparse: Ranked, dense_weight: float = 0.5) -> list[tuple[int, float]]:
    """w * dense + (1 - w) * sparse on min-max-normalised scores; a doc absent from a list
    scores 0 there. Ties break by id (older first), so results are deterministic."""
    d, s = min_max(dense), min_max(sparse)
    fused = {i: dense_weight * d.get(i, 0.0) + (1 - dense_weight) * s.get(i, 0.0)
             for i in d.keys() | s.keys()}
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def max_scaled(ranked: Ranked) -> dict[int, float]:
    """Scores divided by the list's best (negatives as 0): a list whose candidates all score
    alike stays flat, where min-max would stretch its small differences to [0, 1]."""
    if not ranked:
        return {}
    top = max(s for _, s in ranked)
    return {i: max(s, 0.0) / top if top > 0 else 0.0 for i, s in ranked}


def relative_sum(dense: Ranked, sparse: Ranked, dense_weight: float = 0.5) -> list[tuple[int, float]]:
    """w * dense + (1 - w) * sparse on max-scaled scores: each list counts as much as it
    separates its candidates. Ties break by id."""
    d, s = max_scaled(dense), max_scaled(sparse)
    fused = {i: dense_weight * d.get(i, 0.0) + (1 - dense_weight) * s.get(i, 0.0)
             for i in d.keys() | s.keys()}
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def reciprocal_rank(dense: Ranked, sparse: Ranked, dense_weight: float = 0.5,
                    k: int = 60) -> list[tuple[int, float]]:
    """Weighted RRF: sum of w / (k + rank) over the lists (rank from 1), scaled so 1.0 is the
    best possible; k = 60 as in Cormack et al. (2009)."""
    fused: dict[int, float] = {}
    for weight, ranked in ((dense_weight, dense), (1 - dense_weight, sparse)):
        for rank, (i, _) in enumerate(ranked, start=1):
            fused[i] = fused.get(i, 0.0) + weight * (k + 1) / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def fuse(method: str, dense: Ranked, sparse: Ranked, dense_weight: float = 0.5,
         rrf_k: int = 60) -> list[tuple[int, float]]:
    if method == "rrf":
        return reciprocal_rank(dense, sparse, dense_weight, rrf_k)
    if method == "weighted":
        return weighted_sum(dense, sparse, dense_weight)
    if method == "relative":
        return relative_sum(dense, sparse, dense_weight)
    raise ValueError(f"unknown fusion {method!r}: use 'weighted', 'relative' or 'rrf'")


def fuse_many(method: str, lists: Sequence[tuple[float, Ranked]], rrf_k: int = 60) -> list[tuple[int, float]]:
    """`fuse` over any number of (weight, list) pairs, each list normalised as `method` does
    (min-max, max-scaled, or reciprocal rank); a doc absent from a list scores 0 there. Ties
    break by id."""
    fused: dict[int, float] = {}
    for weight, ranked in lists:
        if method == "rrf":
            scores = {i: (rrf_k + 1) / (rrf_k + rank) for rank, (i, _) in enumerate(ranked, start=1)}
        elif method == "weighted":
            scores = min_max(ranked)
        elif method == "relative":
            scores = max_scaled(ranked)
        else:
            raise ValueError(f"unknown fusion {method!r}: use 'weighted', 'relative' or 'rrf'")
        for i, s in scores.items():
            fused[i] = fused.get(i, 0.0) + weight * s
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))
