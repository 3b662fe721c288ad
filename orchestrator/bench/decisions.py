"""`middle bench decisions`: is a project decision among what memory returns for a symptom-only
bug report (the shape of shared/data/decisions/sde_dev.json), and does an amendment rank above
the rule it superseded?"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from orchestrator.errors import ConfigError

from .datasets import _load_json, _need
from .metrics import mean
from .runner import Bench, Progress, no_progress

K = 10
SEED = 7  # the protocol's seed (shared/data/README.md): the figures there use it
HOUR_S = 3600.0
START_S = 1_700_000_000.0  # the first doc's time on the backend's clock (any fixed instant)


@dataclass
class DecisionQuery:
    task: str
    category: str
    query: str
    gold: set[int]
    stale: set[int] = field(default_factory=set)


@dataclass
class DecisionSet:
    name: str
    docs: list[str]
    queries: list[DecisionQuery]


def _indices(item: dict, key: str, path: Path, where: str, size: int) -> set[int]:
    optional = key == "stale" and isinstance(item, dict) and key not in item
    values = [] if optional else _need(item, key, path, where, list)
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < size for v in values):
        raise ConfigError(f"dataset file {path}: {where}[{key!r}] should list doc indices "
                          f"from 0 to {size - 1}")
    return set(values)


def load_decisions(path: Path) -> list[DecisionSet]:
    """The sets of a decision-recall file; a wrong shape names the file and the place."""
    path = Path(path)
    data = _load_json(path)
    sets = _need(data, "sets", path, "the file", dict)
    if not sets:
        raise ConfigError(f"dataset file {path}: 'sets' is empty")
    out = []
    for name, item in sets.items():
        where = f"set {name!r}"
        docs = _need(item, "docs", path, where, list)
        if not docs or not all(isinstance(d, str) for d in docs):
            raise ConfigError(f"dataset file {path}: {where}['docs'] should be a non-empty "
                              "list of texts")
        queries = []
        for i, q in enumerate(_need(item, "queries", path, where, list)):
            qwhere = f"{where} query {i}"
            gold = _indices(q, "gold", path, qwhere, len(docs))
            if not gold:
                raise ConfigError(f"dataset file {path}: {qwhere} has no gold doc")
            queries.append(DecisionQuery(str(q.get("task", i)), str(q.get("category", "")),
                                         _need(q, "query", path, qwhere, str), gold,
                                         _indices(q, "stale", path, qwhere, len(docs))))
        out.append(DecisionSet(str(name), docs, queries))
    return out


def index_order(dataset: DecisionSet, seed: int = SEED) -> list[int]:
    """Doc indices in a seeded shuffled order, except that each superseded doc comes before the
    doc that amends it (their two places are swapped when the shuffle put them the other way)."""
    order = list(range(len(dataset.docs)))
    random.Random(seed).shuffle(order)
    place = {doc: pos for pos, doc in enumerate(order)}
    for q in dataset.queries:
        for stale in q.stale:
            for gold in q.gold:
                if place[stale] > place[gold]:
                    order[place[stale]], order[place[gold]] = gold, stale
                    place[stale], place[gold] = place[gold], place[stale]
    return order


def _score(ranks: list[tuple[int | None, int | None]]) -> dict[str, Any]:
    """hit@1, hit@5, MRR@10 from (gold rank, stale rank) pairs, ranks from 1 (None: not in 10)."""
    golds = [g for g, _ in ranks]
    return {"hit@1": mean(1.0 if g == 1 else 0.0 for g in golds),
            "hit@5": mean(1.0 if g is not None and g <= 5 else 0.0 for g in golds),
            "mrr@10": mean(1.0 / g if g else 0.0 for g in golds)}


def _first_rank(ranked: list[set[int]], wanted: set[int]) -> int | None:
    return next((r for r, owners in enumerate(ranked, start=1) if owners & wanted), None)


def run_set(bench: Bench, spec: Any, dataset: DecisionSet, progress: Progress,
            seed: int = SEED) -> dict[str, Any]:
    """One backend on one set in a fresh store: docs one per call an hour apart, then each query."""
    order = index_order(dataset, seed)
    owners: dict[str, set[int]] = {}
    for i, text in enumerate(dataset.docs):
        owners.setdefault(text, set()).add(i)
    advance = progress(f"{spec.label}: {dataset.name}", len(order) + len(dataset.queries))
    per_task: list[dict[str, Any]] = []
    with bench.scratch() as tmp:
        backend = bench.open(spec, tmp / "store")
        now = [START_S]
        backend.clock = lambda: now[0]  # the backend's clock: one doc an hour
        try:
            for step, position in enumerate(order):
                now[0] = START_S + step * HOUR_S
                backend.index([dataset.docs[position]])
                backend.flush()
                advance(1)
            now[0] = START_S + len(order) * HOUR_S
            for q in dataset.queries:
                (result,) = backend.retrieve([q.query], K)
                ranked = [owners.get(d, set()) for d in result["docs"][:K]]
                gold, stale = _first_rank(ranked, q.gold), _first_rank(ranked, q.stale)
                per_task.append({"task": q.task, "category": q.category, "gold_rank": gold,
                                 "stale_rank": stale if q.stale else None,
                                 "stale_first": bool(q.stale) and stale is not None
                                 and (gold is None or stale < gold)})
                advance(1)
        finally:
            backend.close()
    row = {"backend": spec.label, "set": dataset.name, "docs": len(dataset.docs),
           "queries": len(dataset.queries),
           **_score([(t["gold_rank"], t["stale_rank"]) for t in per_task])}
    amended = [t for t, q in zip(per_task, dataset.queries) if q.stale]
    row["amended"] = len(amended)
    row["stale_first"] = sum(t["stale_first"] for t in amended)
    row["tasks"] = per_task
    return row


def run_decisions(dataset: Path, backends: Sequence[str], *, work_dir: Path | None = None,
                  cached_embeddings: bool = True, progress: Progress = no_progress,
                  seed: int = SEED) -> dict[str, Any]:
    """Each backend on each set of a decision-recall file (shared/data/README.md's protocol)."""
    shared = None if cached_embeddings else {"embedding_cache": False}
    bench = Bench(backends, work_dir, progress, shared_options=shared)  # bad names fail first
    sets = load_decisions(dataset)
    results = [run_set(bench, spec, s, progress, seed) for spec in bench.specs for s in sets]
    return {"dataset": str(dataset), "kind": "decisions", "seed": seed,
            "sets": {s.name: {"docs": len(s.docs), "queries": len(s.queries)} for s in sets},
            "results": results}
