"""The tables of docs/memory-benchmarks.md's thread section from the --json files of run.sh,
and the pooled held-out rows: every long-range ticket of the held-out histories joined, its
mean, its 95% bootstrap interval (metrics.interval95) and the paired difference's interval."""
import json
import sys
from pathlib import Path

from orchestrator.bench.metrics import interval95, mean

HERE = Path(__file__).parent
ROWS = [("bm25", "start"), ("bm25 (related)", "start"), ("bm25 (block)", "start"),
        ("hybrid", "start"), ("hybrid (related)", "start"), ("hybrid (block)", "start")]


def rows(name):
    data = json.loads((HERE / f"{name}.json").read_text())
    return {(r["backend"], r["query"]): r for r in data["results"]}, data


def show(name):
    table, data = rows(name)
    print(f"\n{name}: {data['tickets']} tickets, {data['scored']} scored, {data['long_scored']} long-range")
    print("| backend | query | R@5 | hit@5 | long R@5 (95% interval) | long hit@5 | long n |")
    print("|---|---|---|---|---|---|---|")
    for key, r in table.items():
        lo, hi = r["long_recall@5_ci95"]
        print(f"| {key[0]} | {key[1]} | {r['recall@5']:.3f} | {r['hit@5']:.3f} | "
              f"{r['long_recall@5']:.3f} ({lo:.3f} to {hi:.3f}) | {r['long_hit@5']:.3f} | {r['long_scored']} |")


def pooled(names):
    tables = [rows(n)[0] for n in names]
    per = {key: sum((t[key]["long_recall@5_per_ticket"] for t in tables), []) for key in ROWS}
    print(f"\npooled over {', '.join(names)}: {len(per[ROWS[0]])} long-range tickets")
    print("| backend | long R@5 (95% interval) |")
    print("|---|---|")
    for key in ROWS:
        lo, hi = interval95(per[key])
        print(f"| {key[0]} | {mean(per[key]):.3f} ({lo:.3f} to {hi:.3f}) |")
    print("\n| hybrid row minus bm25 row, per ticket | mean (95% interval) |")
    print("|---|---|")
    for ours in ("hybrid (related)", "hybrid (block)"):
        for base in ("bm25", "bm25 (related)", "bm25 (block)"):
            diff = [a - b for a, b in zip(per[(ours, "start")], per[(base, "start")])]
            lo, hi = interval95(diff)
            print(f"| {ours} − {base} | {mean(diff):+.3f} ({lo:+.3f} to {hi:+.3f}) |")


if __name__ == "__main__":
    names = sys.argv[1:]
    for n in names:
        show(n)
    if len(names) > 1:
        pooled(names)
